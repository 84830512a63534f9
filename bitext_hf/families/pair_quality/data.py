"""The pair classifier's data: correct pairs from the training specs, wrong pairs made from them, and each pair's
features (the encoder's cosine and margin over its language's corpus, and the surface checks of
``modeling/pair_quality/features_pair_quality.py``).

The wrong pairs (:data:`~bitext_hf.families.pair_quality.arguments.NEGATIVE_KINDS`) are bicleaner-ai's (a random
other target, words dropped, words replaced by words of the corpus drawn by frequency, the encoder's nearest other
target) and what mining and alignment produce: the next message's translation (catalog order, as neighbouring
sentences of a document), a translation cut short, the source copied untranslated, the same message translated
into another language, a number changed. The margin of every pair is the ``score`` job's: row i with row i, the
neighbourhoods over the whole corpus of its language (correct and wrong pairs together, as in a corpus to clean).

``load_data`` prepares once: rank 0 writes the prepared datasets into ``<output_dir>/prepared`` and the other ranks
(and a resumed run) read them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.data import PairSet, load_pairs
from bitext_hf.families.pair_quality.arguments import PairDataArguments
from bitext_hf.training.distributed import main_process_first

__all__ = ["LabelledPairs", "PreparedData", "labelled_pairs", "load_data", "make_negatives", "pair_scores"]

logger = logging.getLogger("train_pair_quality")

_NUMBER = re.compile(r"\d+")


@dataclasses.dataclass
class LabelledPairs:
    """Pairs with their label (1: a translation, 0: a wrong pair) and kind ("correct" or a negative kind)."""

    sources: list[str]
    targets: list[str]
    labels: list[int]
    kinds: list[str]
    language: str

    def __len__(self) -> int:
        return len(self.sources)

    def extend(self, sources: Sequence[str], targets: Sequence[str], label: int, kinds: Sequence[str]) -> None:
        self.sources.extend(sources)
        self.targets.extend(targets)
        self.labels.extend([label] * len(sources))
        self.kinds.extend(kinds)


@dataclasses.dataclass
class PreparedData:
    """``train`` and ``calibration`` (training languages) and ``eval_sets`` (held-out languages): ``datasets.Dataset``
    with ``features``, ``labels``, ``kind`` and ``language``; ``stats``: the counts."""

    train: Any
    calibration: Any
    eval_sets: dict[str, Any]
    stats: dict[str, Any]


def _units(text: str) -> tuple[list[str], str]:
    """The pieces a text is cut into (words, or characters for a text without spaces: CJK, Thai) and their glue."""
    words = text.split()
    return (words, " ") if len(words) >= 3 else (list(text), "")


def _truncated(text: str, rng: np.random.Generator) -> str | None:
    units, glue = _units(text)
    if len(units) < 2:
        return None
    return glue.join(units[: max(1, int(len(units) * rng.uniform(0.3, 0.7)))])


def _dropped(text: str, rng: np.random.Generator) -> str | None:
    units, glue = _units(text)
    if len(units) < 3:
        return None
    keep = rng.random(len(units)) >= 0.35
    keep[rng.integers(len(units))] = False  # at least one unit goes
    return glue.join(unit for unit, kept in zip(units, keep) if kept) or None


def _replaced(text: str, rng: np.random.Generator, vocabulary: list[str], weights: np.ndarray) -> str | None:
    units, glue = _units(text)
    if len(units) < 2 or not vocabulary:
        return None
    chosen = rng.random(len(units)) < 0.35
    chosen[rng.integers(len(units))] = True
    draws = rng.choice(len(vocabulary), size=int(chosen.sum()), p=weights)
    replacements = iter(vocabulary[index] for index in draws)
    return glue.join(next(replacements) if pick else unit for unit, pick in zip(units, chosen))


def _numbers_changed(text: str, rng: np.random.Generator) -> str | None:
    numbers = list(_NUMBER.finditer(text))
    if not numbers:
        return None
    match = numbers[rng.integers(len(numbers))]
    value = int(match.group()) + int(rng.integers(1, 10))
    return text[: match.start()] + str(value) + text[match.end() :]


def _vocabulary(targets: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The target side's units and their frequencies (bicleaner-ai replaces words by words drawn by frequency)."""
    counts = Counter(unit for text in targets for unit in _units(text)[0] if unit.strip())
    vocabulary = list(counts)
    weights = np.array([counts[unit] for unit in vocabulary], dtype=np.float64)
    return vocabulary, weights / weights.sum() if len(weights) else weights


def make_negatives(
    pairs: PairSet,
    rows: np.ndarray,
    kinds: Sequence[str],
    rng: np.random.Generator,
    *,
    nearest: np.ndarray | None = None,
    other_languages: dict[str, list[str]] | None = None,
) -> LabelledPairs:
    """One wrong pair for each of ``rows`` (indices into ``pairs``), their kinds in turn; a row whose kind cannot be
    made of it (no number to change, a one-word text to cut, no other language's translation) gets the next kind
    that can. ``nearest[i]``: the row whose target the encoder finds closest to row ``rows[i]``'s source (another
    translation); ``other_languages``: English -> its translations into other languages."""
    vocabulary, weights = _vocabulary(pairs.tgt)
    out = LabelledPairs([], [], [], [], pairs.tgt_lang)
    for position, row in enumerate(rows.tolist()):
        source, target = pairs.src[row], pairs.tgt[row]
        for turn in range(len(kinds)):
            kind = kinds[(position + turn) % len(kinds)]
            wrong: str | None = None
            if kind == "misaligned":
                wrong = pairs.tgt[int(rng.integers(len(pairs.tgt)))]
            elif kind == "neighbour":
                wrong = pairs.tgt[row + 1] if row + 1 < len(pairs.tgt) else pairs.tgt[row - 1]
            elif kind == "nearest" and nearest is not None:
                wrong = pairs.tgt[int(nearest[position])]
            elif kind == "truncated":
                wrong = _truncated(target, rng)
            elif kind == "dropped_words":
                wrong = _dropped(target, rng)
            elif kind == "replaced_words":
                wrong = _replaced(target, rng, vocabulary, weights)
            elif kind == "copy":
                wrong = source
            elif kind == "wrong_language" and other_languages:
                translations = other_languages.get(source)
                wrong = translations[int(rng.integers(len(translations)))] if translations else None
            elif kind == "numbers":
                wrong = _numbers_changed(target, rng)
            # A "wrong" pair that is the right one (two messages translated alike) is not wrong.
            if wrong and wrong.strip() and wrong != target:
                out.extend([source], [wrong], 0, [kind])
                break
    return out


def pair_scores(
    encode: Callable[[list[str]], np.ndarray], sources: list[str], targets: list[str], margin_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """(cosine, ratio margin) of row i with row i, neighbourhoods over the whole corpus: what ``bitext-hf score``
    computes for a pairs file."""
    from bitext_hf.mining import score_pairs

    unique = list(dict.fromkeys([*sources, *targets]))
    vectors = encode(unique)
    position = {text: index for index, text in enumerate(unique)}
    src = vectors[[position[text] for text in sources]]
    tgt = vectors[[position[text] for text in targets]]
    cosines = np.einsum("ij,ij->i", src, tgt).astype(np.float32)
    margins = score_pairs(src, tgt, k=margin_k, margin="ratio")
    return cosines, margins


def _nearest_other_target(encode: Callable[[list[str]], np.ndarray], pairs: PairSet, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the row (among ``rows``) whose target is the closest to its source and differs from its
    own target: the encoder's hard negative."""
    from bitext_hf.mining.knn import knn_search

    sources = [pairs.src[row] for row in rows.tolist()]
    targets = [pairs.tgt[row] for row in rows.tolist()]
    _, neighbours = knn_search(encode(sources), encode(targets), min(3, len(rows)))
    chosen = []
    for position, candidates in enumerate(neighbours.tolist()):
        other = next((c for c in candidates if targets[c] != targets[position]), candidates[-1])
        chosen.append(int(rows[other]))
    return np.array(chosen, dtype=np.int64)


def labelled_pairs(
    pairs: PairSet,
    count: int,
    script_args: PairDataArguments,
    rng: np.random.Generator,
    encode: Callable[[list[str]], np.ndarray],
    other_languages: dict[str, list[str]],
) -> LabelledPairs:
    """``count`` correct pairs of ``pairs`` (sampled) and ``negatives_per_pair`` wrong ones for each."""
    rows = np.sort(rng.choice(len(pairs.src), size=min(count, len(pairs.src)), replace=False))
    out = LabelledPairs(
        [pairs.src[row] for row in rows.tolist()], [pairs.tgt[row] for row in rows.tolist()], [], [], pairs.tgt_lang
    )
    out.labels, out.kinds = [1] * len(rows), ["correct"] * len(rows)
    wanted = round(len(rows) * script_args.negatives_per_pair)
    negative_rows = rng.choice(rows, size=wanted, replace=wanted > len(rows))
    nearest = None
    if "nearest" in script_args.negative_kinds:
        nearest = _nearest_other_target(encode, pairs, negative_rows)
    negatives = make_negatives(
        pairs, negative_rows, script_args.negative_kinds, rng, nearest=nearest, other_languages=other_languages
    )
    out.extend(negatives.sources, negatives.targets, 0, negatives.kinds)
    return out


def _with_features(labelled: LabelledPairs, encode: Callable[[list[str]], np.ndarray], margin_k: int) -> Any:
    import datasets

    from bitext_hf.modeling.pair_quality import pair_features

    cosines, margins = pair_scores(encode, labelled.sources, labelled.targets, margin_k)
    features = pair_features(labelled.sources, labelled.targets, cosines, margins).numpy()
    return datasets.Dataset.from_dict(
        {
            "features": features.tolist(),
            "labels": np.asarray(labelled.labels, dtype=np.float32).tolist(),
            "kind": labelled.kinds,
            "language": [labelled.language] * len(labelled),
            "source": labelled.sources,
            "target": labelled.targets,
        }
    )


def memo_encoder(model: str, batch_size: int) -> Callable[[list[str]], np.ndarray]:
    """``encode(texts) -> (n, d)`` of the encoder ``model``, each distinct text encoded once per run, through the
    package's encoding cache (a run prepared again, or the other variant's recipe on the same pairs, reads the
    vectors back instead of encoding them)."""
    from bitext_hf.encoders.spec import EncoderSpec
    from bitext_hf.encoding import Embedder

    embedder = Embedder(model=model, batch_size=batch_size, show_progress=False)
    memo: dict[str, np.ndarray] = {}

    def encode(texts: list[str]) -> np.ndarray:
        new = [text for text in dict.fromkeys(texts) if text not in memo]
        if new:
            for text, vector in zip(new, embedder.embed(new, "pair")):
                memo[text] = vector
        return np.stack([memo[text] for text in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    encode.identity = EncoderSpec(model).name  # type: ignore[attr-defined]  (what the jobs compare with)
    return encode


def _translations_by_english(sets: Sequence[PairSet]) -> dict[str, dict[str, str]]:
    """English -> {language: its translation} over ``sets``."""
    table: dict[str, dict[str, str]] = defaultdict(dict)
    for pairs in sets:
        for source, target in zip(pairs.src, pairs.tgt):
            table[source].setdefault(pairs.tgt_lang, target)
    return table


def _others(table: dict[str, dict[str, str]], language: str) -> dict[str, list[str]]:
    return {
        english: [text for other, text in translations.items() if other != language]
        for english, translations in table.items()
        if len(translations) > 1
    }


def _load_sets(specs: Sequence[str], min_words: int) -> list[PairSet]:
    sets = []
    for spec in specs:
        pairs = load_pairs(spec)
        keep = [i for i, source in enumerate(pairs.src) if len(source.split()) >= min_words]
        sets.append(dataclasses.replace(pairs, src=[pairs.src[i] for i in keep], tgt=[pairs.tgt[i] for i in keep]))
    return sets


def prepare(script_args: PairDataArguments, seed: int) -> PreparedData:
    """Build the datasets (see the module docstring); the same ``seed`` gives the same pairs and features."""
    import datasets

    rng = np.random.default_rng(seed)
    encode = memo_encoder(script_args.encoder, script_args.encode_batch_size)
    train_sets = _load_sets(script_args.train_pairs, script_args.min_words)
    eval_sets = _load_sets(script_args.eval_pairs, script_args.min_words)
    table = _translations_by_english([*train_sets, *eval_sets])
    train_parts, calibration_parts, evaluation = [], [], {}
    for pairs in train_sets:
        labelled = labelled_pairs(
            pairs, script_args.pairs_per_language, script_args, rng, encode, _others(table, pairs.tgt_lang)
        )
        dataset = _with_features(labelled, encode, script_args.margin_k)
        split = dataset.train_test_split(test_size=script_args.calibration_fraction, seed=seed)
        train_parts.append(split["train"])
        calibration_parts.append(split["test"])
    for pairs in eval_sets:
        labelled = labelled_pairs(
            pairs, script_args.eval_pairs_per_language, script_args, rng, encode, _others(table, pairs.tgt_lang)
        )
        evaluation[pairs.name or pairs.tgt_lang] = _with_features(labelled, encode, script_args.margin_k)
    train = datasets.concatenate_datasets(train_parts).shuffle(seed=seed)
    calibration = datasets.concatenate_datasets(calibration_parts)
    stats = {
        "encoder": encode.identity,  # type: ignore[attr-defined]
        "train": len(train),
        "calibration": len(calibration),
        "train_kinds": dict(sorted(Counter(train["kind"]).items())),
        "train_languages": [pairs.tgt_lang for pairs in train_sets],
        "eval": {name: len(dataset) for name, dataset in evaluation.items()},
    }
    return PreparedData(train, calibration, evaluation, stats)


def load_data(script_args: PairDataArguments, seed: int, output_dir: str | Path) -> PreparedData:
    """:func:`prepare`, once per run: rank 0 prepares and saves into ``<output_dir>/prepared``, the other ranks (and
    a resumed run with the same arguments) read it."""
    import datasets

    folder = Path(output_dir) / "prepared"
    key = json.dumps({"arguments": dataclasses.asdict(script_args), "seed": seed}, sort_keys=True)
    with main_process_first():
        if (folder / "arguments.json").is_file() and (folder / "arguments.json").read_text() == key:
            stats = json.loads((folder / "stats.json").read_text())
            return PreparedData(
                datasets.load_from_disk(str(folder / "train")),
                datasets.load_from_disk(str(folder / "calibration")),
                {name: datasets.load_from_disk(str(folder / "eval" / name)) for name in stats["eval"]},
                stats,
            )
        prepared = prepare(script_args, seed)
        prepared.train.save_to_disk(str(folder / "train"))
        prepared.calibration.save_to_disk(str(folder / "calibration"))
        for name, dataset in prepared.eval_sets.items():
            dataset.save_to_disk(str(folder / "eval" / name))
        (folder / "stats.json").write_text(json.dumps(prepared.stats))
        (folder / "arguments.json").write_text(key)  # last: a folder without it is prepared again
        return prepared
