"""Tests for ``bitext_hf.hub.figures``: each figure is a readable PNG with a caption that states its numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.image import imread

from bitext_hf.evaluation import gold_and_random_margins
from bitext_hf.hub import figures


def png_shape(path) -> tuple[int, ...]:
    from matplotlib.image import imread

    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    return imread(str(path)).shape


def test_xsim_heatmap_rows_are_sources_and_columns_targets(tmp_path):
    figure = figures.xsim_heatmap({"wo": 5.925, "en-wo": 8.0, ("fr", "en"): 1.5}, tmp_path / "xsim.png")
    assert figure.path == tmp_path / "xsim.png" and str(tmp_path / "xsim.png") == str(figure.__fspath__())
    assert "by direction: en→wo 8.00%, fr→en 1.50%, wo→en 5.92%." in figure.caption
    height, width, _ = png_shape(figure.path)
    assert width >= 400 and height >= 250
    # More directions, a larger grid: the figure grows so that labels stay readable.
    many = figures.xsim_heatmap({f"l{i}-en": float(i) for i in range(12)}, tmp_path / "many.png")
    assert png_shape(many.path)[0] > height


def test_xsim_heatmap_refuses_nothing_and_non_png(tmp_path):
    with pytest.raises(ValueError, match="at least one"):
        figures.xsim_heatmap({"wo": None}, tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"\.png"):
        figures.xsim_heatmap({"wo": 1.0}, tmp_path / "x.jpg")
    assert list(tmp_path.iterdir()) == []


def test_gold_and_random_margins_separate_aligned_embeddings(tmp_path):
    rng = np.random.default_rng(0)
    src = rng.normal(size=(60, 16)).astype(np.float32)
    tgt = src + 0.3 * rng.normal(size=src.shape).astype(np.float32)
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    gold, random = gold_and_random_margins(src, tgt, k=4)
    assert gold.shape == random.shape == (60,)
    assert gold.min() > random.max()  # a clean separation on near-copies
    # Random pairs are never a gold pair: with identical sides, a gold pair would score the top ratio margin.
    same_gold, same_random = gold_and_random_margins(src, src.copy(), k=4, seed=3)
    assert np.all(same_random < same_gold.min())
    figure = figures.margin_distribution(gold, random, tmp_path / "margins.png", threshold=1.05)
    assert "60 held-out gold pairs and 60 random pairs" in figure.caption
    assert "100.0% of gold pairs and 0.0% of random pairs pass" in figure.caption
    assert png_shape(figure.path)[1] >= 600
    with pytest.raises(ValueError, match="at least 2"):
        gold_and_random_margins(src[:1], tgt[:1])


def test_score_histogram_caption_gives_quartiles(tmp_path):
    figure = figures.score_histogram([1.0, 1.1, 1.2, 1.3, 1.4], tmp_path / "h.png", threshold=1.05, margin="distance")
    assert figure.caption == (
        "Scores of the 5 mined pairs (distance margin): median 1.200, quartiles 1.100 to 1.300; threshold 1.05. "
        "Pairs just above the threshold are the least certain translations."
    )
    png_shape(figure.path)
    with pytest.raises(ValueError, match="at least one"):
        figures.score_histogram([], tmp_path / "e.png")


def test_training_curve_reads_the_latest_checkpoint_state(tmp_path):
    run = tmp_path / "run"
    for step, loss in ((10, 9.0), (20, 2.0)):
        (run / f"checkpoint-{step}").mkdir(parents=True)
        history = [{"step": s, "loss": loss - 0.1 * s} for s in range(1, step + 1)]
        history.append({"step": step, "eval_loss": 1.5, "eval_xsim": 12.5, "epoch": 1.0})
        state = {"global_step": step, "log_history": history}
        (run / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps(state))
    (run / "checkpoint-3-tmp").mkdir()  # not a checkpoint name: ignored
    assert len(figures.load_log_history(run)) == 21  # checkpoint-20's, not checkpoint-10's
    figure = figures.training_curve(run, tmp_path / "curve.png")
    assert figure.caption == (
        "Training curve by optimizer step: training loss 1.900 at step 1 -> 0.000 at step 20; dashed, right axis: "
        "xsim on the evaluation sets."
    )
    png_shape(figure.path)
    assert figures.training_curve(tmp_path / "no-run", tmp_path / "none.png") is None
    assert figures.training_curve([{"step": 1, "learning_rate": 1e-4}], tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_training_curve_draws_each_loss_part_and_keeps_the_legend_inside(tmp_path):
    # Laser3's tasks alternate: the total stays flat while the distillation loss falls (the issue's case).
    history = [
        {"step": step, "loss": 0.69, "loss_distil": 0.63 - 0.001 * step, "loss_mask": 9.0 - 0.005 * step}
        for step in range(10, 310, 10)
    ]
    history += [{"step": 300, f"eval_{name}/accuracy_backward_direction": 0.5} for name in ("fr-en:gettext", "x")]
    figure = figures.training_curve(history, tmp_path / "curve.png")
    assert "distil loss 0.620 at step 10 -> 0.330 at step 300" in figure.caption
    assert "mask loss 8.950 at step 10 -> 7.500 at step 300" in figure.caption
    assert "the dotted grey total mixes the parts" in figure.caption
    png_shape(figure.path)
    image = imread(str(figure.path))
    # Long legend labels once overflowed both edges and were cut: the outermost pixel columns must stay blank.
    assert image[:, :2, :3].min() == 1.0 and image[:, -2:, :3].min() == 1.0
    musr = figures.training_curve(
        [{"step": s, "loss": 3.0 - 0.1 * s, "ce": 2.9 - 0.1 * s, "kl": 0.1} for s in (1, 2, 3)], tmp_path / "m.png"
    )
    assert "cross-entropy (ce) 2.800" in musr.caption and "KL consistency (kl) 0.100" in musr.caption


def test_training_curve_bad_state_file_is_named(tmp_path):
    (tmp_path / "trainer_state.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"trainer_state\.json: not a readable"):
        figures.load_log_history(tmp_path)


def test_card_figures_show_in_the_card_and_travel_with_the_export(tmp_path):
    from bitext_hf.hub import render_model_card

    history = [{"step": step, "loss": 2.0 / step} for step in range(1, 6)]
    made = figures.card_figures(
        tmp_path / "figures",
        xsim={"wo": 5.9, "en-wo": 7.0},
        gold_scores=[1.3, 1.2],
        random_scores=[0.9, 1.0],
        threshold=1.1,
        log_history=history,
    )
    assert [figure.path.name for figure in made] == [
        "xsim_heatmap.png",
        "margin_distribution.png",
        "training_curve.png",
    ]
    card = render_model_card("generic", model_name="Tiny", figures=made)
    for figure in made:
        assert f"]({figure.path.name})" in card and f"*{figure.caption}*" in card
    only_curve = figures.card_figures(tmp_path / "other", log_history=[])
    assert only_curve == []  # an empty history draws nothing
