"""How ``encode_runs_ray`` splits runs of sentences into Ray tasks (``run_tasks``): by where they start, each task's
sentences covering all its runs, every run in exactly one task, neighbours sharing only the sentences runs reach
into. Pure: no Ray needed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bitext_hf.encoding.ray import run_tasks


def documents_runs(sizes: list[int], longest: int, seed: int = 0) -> list[tuple[int, int]]:
    """Every run of 1..longest sentences inside each document of ``sizes`` sentences, shuffled (as distinct overlap
    texts come: some runs missing)."""
    runs, offset = [], 0
    for size in sizes:
        runs += [(offset + s, offset + s + n) for n in range(1, longest + 1) for s in range(size - n + 1)]
        offset += size
    rng = np.random.default_rng(seed)
    kept = [run for run in runs if rng.random() > 0.1]
    return [kept[i] for i in rng.permutation(len(kept))]


@pytest.mark.parametrize("size", [1, 7, 40, 10_000])
def test_tasks_cover_every_run_once(size):
    sizes = [12, 1, 30, 5, 60, 3]
    runs = documents_runs(sizes, 4)
    tasks = run_tasks(runs, sum(sizes), size)
    numbers = sorted(n for _, members in tasks for n in members)
    assert numbers == list(range(len(runs)))
    for (low, high), members in tasks:
        assert all(low <= runs[n][0] and runs[n][1] <= high for n in members)
        assert low == min(runs[n][0] for n in members) and high == max(runs[n][1] for n in members)
        starts = [runs[n][0] for n in members]
        assert max(starts) - min(starts) < size or len(set(starts)) == 1
    ranges = sorted(bounds for bounds, _ in tasks)
    # Neighbours share at most the three sentences a run of four reaches past its start.
    assert all(a[0] < b[0] and a[1] - b[0] <= 3 for a, b in itertools.pairwise(ranges))
    if size >= 10_000:
        assert len(tasks) == 1


def test_a_long_document_is_split_and_its_runs_kept_whole():
    runs = [(0, 3), (2, 5), (4, 7), (7, 8), (8, 9)]
    assert run_tasks(runs, 9, 2) == [((0, 3), [0]), ((2, 5), [1]), ((4, 7), [2]), ((7, 9), [3, 4])]


def test_a_workers_encoder_composes_runs_where_the_encoder_can(monkeypatch):
    """What a Ray worker loads (``encoder_loader``): the default encoder's ``encode_runs`` where it has one, and
    nothing of the kind for an encoder that only encodes texts (its tasks then get the joined texts)."""
    from bitext_hf import encoders
    from bitext_hf.encoding.ray import encoder_loader

    worker = encoder_loader(None)()
    sentences = ["Ein Satz mit einigen Wörtern.", "Noch einer, etwas länger als der erste."]
    composed = worker.encode_runs(sentences, [(0, 2), (1, 2)])
    assert np.abs(composed - worker([" ".join(sentences), sentences[1]])).max() < 1e-5

    class TextsOnly:
        def encode(self, texts, batch_size, show_progress):
            return np.ones((len(texts), 3), dtype=np.float32)

    monkeypatch.setattr(encoders, "load_encoder", lambda *args, **kwargs: TextsOnly())
    worker = encoder_loader(None)()
    assert not hasattr(worker, "encode_runs") and worker(["a", "b"]).shape == (2, 3)
