"""The light pair classifier: its features, configuration and model (the shipped remote code), the wrong pairs its
recipe makes, its calibration and metrics, the default classifier shipped in the package, and the precision it
estimates without gold (``bitext_hf.mining.quality``)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from remote_code_tf4 import transformers_4_dir

from bitext_hf.data import PairSet
from bitext_hf.errors import EncoderLoadError, UsageError
from bitext_hf.families.pair_quality.arguments import NEGATIVE_KINDS, ScriptArguments
from bitext_hf.families.pair_quality.data import make_negatives
from bitext_hf.families.pair_quality.evaluation import (
    evaluate_quality,
    expected_calibration_error,
    fit_calibration,
)
from bitext_hf.mining.quality import (
    DEFAULT_CLASSIFIER_PATH,
    check_classifier_encoder,
    load_classifier,
    precision_at_thresholds,
    threshold_for_precision,
)
from bitext_hf.modeling.pair_quality import (
    FEATURE_NAMES,
    PairQualityClassifier,
    PairQualityConfig,
    PairQualityInputError,
    pair_features,
    text_features,
)

SURFACE = FEATURE_NAMES[2:]


def _surface(source: str, target: str) -> dict[str, float]:
    return dict(zip(SURFACE, text_features(source, target)))


def test_features_read_numbers_placeholders_punctuation_and_copies():
    same = _surface("Delete 3 files from %s?", "%s: 3 Dateien löschen?")
    assert same["numbers_jaccard"] == 1.0 and same["numbers_unmatched"] == 0.0
    assert same["placeholders_jaccard"] == 1.0 and same["end_punctuation_match"] == 1.0
    differ = _surface("Delete 3 files from %s?", "4 Dateien löschen.")
    assert differ["numbers_jaccard"] == 0.0 and differ["numbers_unmatched"] > 0
    assert differ["placeholders_jaccard"] == 0.0 and differ["end_punctuation_match"] == 0.0
    # Full-width CJK marks are the same kind as the Latin ones.
    assert _surface("Are you sure?", "本当ですか？")["end_punctuation_match"] == 1.0
    copy = _surface("Open the file", "open  the FILE")
    assert copy["identical"] == 1.0 and copy["copied_words"] == 1.0 and copy["trigram_overlap"] == 1.0
    assert _surface("Open the file", "Datei öffnen")["identical"] == 0.0


def test_pair_features_are_one_row_per_pair_with_the_scores_first():
    features = pair_features(["a b", "c"], ["x y", "z"], [0.9, 0.1], [1.3, 0.8])
    assert features.shape == (2, len(FEATURE_NAMES)) and features.dtype == torch.float32
    assert features[:, 0].tolist() == pytest.approx([0.9, 0.1]) and features[:, 1].tolist() == pytest.approx(
        [1.3, 0.8]
    )
    with pytest.raises(ValueError, match="one of each per pair"):
        pair_features(["a"], ["x", "y"], [0.1], [1.0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hidden_size": 0}, "hidden_size"),
        ({"hidden_size": True}, "hidden_size"),
        ({"feature_mean": [0.0]}, "feature_mean"),
        ({"feature_scale": [0.0] * len(FEATURE_NAMES)}, "positive"),
        ({"feature_scale": [float("nan")] * len(FEATURE_NAMES)}, "finite"),
        ({"calibration_scale": float("inf")}, "calibration_scale"),
        ({"calibration_bias": "1"}, "calibration_bias"),
        ({"features": []}, "features"),
        ({"margin_k": 0}, "margin_k"),
    ],
)
def test_the_config_refuses_what_cannot_work(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PairQualityConfig(**kwargs)


def _model(**config) -> PairQualityClassifier:
    torch.manual_seed(0)
    return PairQualityClassifier(PairQualityConfig(**config)).eval()


def test_forward_gives_logits_calibrated_probabilities_and_the_loss():
    model = _model(calibration_scale=2.0, calibration_bias=-1.0)
    features = torch.randn(5, len(FEATURE_NAMES))
    output = model(features=features, labels=torch.tensor([1, 0, 1, 0, 1]))
    assert output.logits.shape == (5,) and output.loss.ndim == 0
    assert torch.allclose(output.probabilities, torch.sigmoid(2.0 * output.logits - 1.0))
    with pytest.raises(PairQualityInputError, match=r"\(batch, 13\)"):
        model(features=torch.randn(5, 3))
    with pytest.raises(PairQualityInputError):
        model(features=None)


def test_the_standardisation_of_the_config_applies():
    mean = [float(i) for i in range(len(FEATURE_NAMES))]
    shifted, plain = _model(feature_mean=mean), _model()
    features = torch.randn(4, len(FEATURE_NAMES))
    assert torch.allclose(shifted(features=features + torch.tensor(mean)).logits, plain(features=features).logits)


def test_score_refuses_a_model_trained_on_other_features():
    model = _model(features=["cosine", "margin"])
    with pytest.raises(PairQualityInputError, match="trained on the features"):
        model.score(["a"], ["b"], [0.5], [1.0])


def test_save_and_reload_through_automodel(tmp_path: Path):
    from transformers import AutoModel

    model = _model(calibration_scale=1.5, encoder="some-encoder")
    model.save_pretrained(tmp_path)
    assert sorted(path.name for path in tmp_path.glob("*.py")) == [
        "configuration_pair_quality.py",
        "features_pair_quality.py",
        "modeling_pair_quality.py",
    ]
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert type(loaded) is PairQualityClassifier and loaded.config.encoder == "some-encoder"
    texts = (["Delete 3 files?", "Open"], ["3 Dateien löschen?", "Schließen"], [0.8, 0.2], [1.2, 0.9])
    assert torch.allclose(loaded.score(*texts), model.score(*texts))


@pytest.mark.slow
@pytest.mark.parametrize("transformers_4", [False, True])
def test_remote_code_loads_without_bitext_hf(transformers_4: bool, tmp_path: Path):
    tf4 = transformers_4_dir() if transformers_4 else None
    model = _model()
    model.save_pretrained(tmp_path / "ckpt")
    expected = model.score(["Delete 3 files?"], ["3 Dateien löschen?"], [0.8], [1.2]).tolist()
    paths = ([str(tf4)] if transformers_4 else []) + list(
        dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    )
    code = textwrap.dedent(
        f"""
        import sys, json, importlib.util
        sys.path[:0] = {paths!r}
        assert importlib.util.find_spec("bitext_hf") is None
        import transformers
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(tmp_path / "ckpt")!r}, trust_remote_code=True).eval()
        scores = model.score(["Delete 3 files?"], ["3 Dateien löschen?"], [0.8], [1.2]).tolist()
        print(json.dumps([transformers.__version__, type(model).__name__, scores]))
        """
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    version, name, scores = json.loads(result.stdout.strip().splitlines()[-1])
    assert version.startswith("4.57") if transformers_4 else int(version.split(".")[0]) >= 5
    assert name == "PairQualityClassifier" and scores == pytest.approx(expected, abs=1e-6)


# ------------------------------------------------------------------------------------------------ the wrong pairs


def _pairs() -> PairSet:
    sources = [f"Delete {n} files from the folder now" for n in range(1, 7)] + ["Open the window", "Close it all"]
    targets = [f"{n} Dateien jetzt aus dem Ordner löschen" for n in range(1, 7)] + ["Fenster öffnen", "Alles zu"]
    return PairSet("en", "de", "test", sources, targets)


@pytest.mark.parametrize("kind", NEGATIVE_KINDS)
def test_each_kind_of_wrong_pair_differs_from_the_right_one(kind):
    pairs = _pairs()
    rows = np.arange(6)
    wrong = make_negatives(
        pairs,
        rows,
        [kind],
        np.random.default_rng(0),
        nearest=(rows + 1) % 6,
        other_languages={source: ["Supprimer des fichiers"] for source in pairs.src},
    )
    assert wrong.labels == [0] * len(wrong) and len(wrong) == 6
    assert wrong.kinds == [kind] * 6  # every row could make this kind
    for source, target, row in zip(wrong.sources, wrong.targets, rows):
        assert source == pairs.src[row] and target != pairs.tgt[row] and target.strip()
    if kind == "copy":
        assert wrong.targets == wrong.sources
    if kind == "numbers":
        assert all(a.split()[0] != b.split()[0] for a, b in zip(wrong.targets, pairs.tgt))
    if kind == "truncated":
        assert all(pairs.tgt[row].startswith(target) for target, row in zip(wrong.targets, rows))
    if kind == "wrong_language":
        assert set(wrong.targets) == {"Supprimer des fichiers"}


def test_a_kind_that_cannot_be_made_gives_way_to_the_next():
    pairs = _pairs()
    wrong = make_negatives(pairs, np.array([6, 7]), ["numbers", "copy"], np.random.default_rng(0))
    assert wrong.kinds == ["copy", "copy"]  # no number in "Fenster öffnen" / "Alles zu"


def test_the_script_arguments_refuse_unknown_kinds_and_absurd_values():
    with pytest.raises(UsageError, match="negative_kinds"):
        ScriptArguments(negative_kinds=["typo"])
    with pytest.raises(UsageError, match="negatives_per_pair"):
        ScriptArguments(negatives_per_pair=0)
    with pytest.raises(UsageError, match="calibration_fraction"):
        ScriptArguments(calibration_fraction=1.0)


# ------------------------------------------------------------------------------- calibration and metrics


def test_platt_scaling_recovers_a_known_calibration():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 2, 20000)
    labels = rng.random(20000) < 1 / (1 + np.exp(-(0.5 * logits + 0.3)))
    scale, bias = fit_calibration(logits, labels)
    assert scale == pytest.approx(0.5, abs=0.05) and bias == pytest.approx(0.3, abs=0.05)


def test_expected_calibration_error_by_hand():
    # Two bins: 0.1-0.2 holds [0.15, 0.15] with one positive (gap 0.35), 0.8-0.9 holds [0.85, 0.85] both positive.
    probabilities, labels = np.array([0.15, 0.15, 0.85, 0.85]), np.array([0, 1, 1, 1])
    assert expected_calibration_error(probabilities, labels) == pytest.approx(0.5 * 0.35 + 0.5 * 0.15)
    assert expected_calibration_error(np.array([0.0, 1.0]), np.array([0, 1])) == 0.0


def test_evaluate_quality_reports_each_kind_and_the_baselines():
    probabilities = np.array([0.9, 0.8, 0.2, 0.6, 0.1])
    labels = np.array([1, 1, 0, 0, 0])
    kinds = ["correct", "correct", "copy", "copy", "misaligned"]
    metrics = evaluate_quality(
        probabilities, labels, kinds, cosines=np.array([0.9, 0.5, 0.6, 0.4, 0.1]), baseline_thresholds={"cosine": 0.5}
    )
    assert metrics["auc"] == 1.0 and metrics["kept"] == 1.0
    assert metrics["rejected/copy"] == 0.5 and metrics["rejected/misaligned"] == 1.0
    assert metrics["cosine/auc"] == pytest.approx(5 / 6) and "cosine/mcc" in metrics and "margin/auc" not in metrics


# ------------------------------------------------------------------------------------ precision without gold


def _brute_force(scores, quality, precision):
    best = None
    for threshold in sorted(set(scores.tolist())):
        kept = quality[scores >= threshold]
        if kept.mean() >= precision and (best is None or kept.size > best[2]):
            best = (threshold, kept.mean(), kept.size)
    return best


@pytest.mark.parametrize("seed", range(5))
def test_threshold_for_precision_is_the_lowest_threshold_reaching_it(seed):
    rng = np.random.default_rng(seed)
    scores = rng.choice(np.linspace(0.8, 1.4, 25), size=200)  # many ties
    quality = np.clip(scores - 0.6 + rng.normal(0, 0.2, 200), 0, 1)
    for precision in (0.3, 0.5, 0.7):
        expected = _brute_force(scores, quality, precision)
        found = threshold_for_precision(scores, quality, precision)
        if expected is None:
            assert found is None
        else:
            assert found[0] == expected[0] and found[2] == expected[2] and found[1] == pytest.approx(expected[1])


def test_threshold_for_precision_without_an_answer():
    assert threshold_for_precision(np.array([1.0, 1.1]), np.array([0.2, 0.3]), 0.9) is None
    assert threshold_for_precision(np.zeros(0), np.zeros(0), 0.5) is None


def test_precision_at_thresholds_is_the_mean_and_sum_of_quality():
    rows = precision_at_thresholds(np.array([1.0, 1.2, 1.4]), np.array([0.2, 0.6, 1.0]), [1.1, 1.5])
    assert rows[0] == pytest.approx((1.1, 2, 0.8, 1.6)) and rows[1][1] == 0 and np.isnan(rows[1][2])


# ----------------------------------------------------------------------------------------- loading classifiers


def test_the_default_classifier_ships_and_loads():
    assert (DEFAULT_CLASSIFIER_PATH / "config.json").is_file() and (
        DEFAULT_CLASSIFIER_PATH / "model.safetensors"
    ).is_file()
    classifier = load_classifier("default")
    assert classifier.config.encoder == "use-multilingual-v3" and list(classifier.config.features) == list(
        FEATURE_NAMES
    )
    probabilities = classifier.score(
        ["Delete 3 files?", "Delete 3 files?"], ["3 Dateien löschen?", "Delete 3 files?"], [0.85, 1.0], [1.25, 1.3]
    )
    assert probabilities[0] > 0.5 > probabilities[1]  # a translation, and an untranslated copy


def test_load_classifier_refuses_what_is_no_classifier(tmp_path: Path):
    with pytest.raises(EncoderLoadError, match="cannot load"):
        load_classifier(tmp_path / "missing")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (tmp_path / "other" / "model.safetensors").write_bytes(b"")
    with pytest.raises(EncoderLoadError, match="not a pair classifier"):
        load_classifier(tmp_path / "other")


def test_a_classifier_refuses_another_encoders_cosines():
    model = _model(encoder="use-multilingual-v3")
    check_classifier_encoder(model, "use-multilingual-v3", "default")
    with pytest.raises(UsageError, match="trained on the cosines of the encoder"):
        check_classifier_encoder(model, "my-model", "default")
    check_classifier_encoder(_model(), "anything", "mine")  # no encoder recorded: not checked


# ------------------------------------------------------------------------------------------------------ the recipe


@pytest.mark.slow
def test_the_recipe_trains_calibrates_and_exports_the_same_model_for_the_same_seed(tmp_path: Path):
    """The smoke configuration end to end, twice: a loadable classifier with its calibration, card, figures and
    held-out metrics, and the same weights from the same seed."""
    root = Path(__file__).resolve().parents[1]
    outputs = []
    for run in ("a", "b"):
        done = subprocess.run(
            [sys.executable, str(root / "recipes" / "train_pair_quality.py"), "--config",
             str(root / "recipes" / "configs" / "pair_quality-smoke.yaml"), "--output_dir", str(tmp_path / run)],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(tmp_path / run)
    first, second = outputs
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
    results = json.loads((first / "quality_results.json").read_text())
    assert set(results["en-ko:gettext"]) >= {"auc", "mcc", "ece", "kept", "cosine/auc", "margin/auc"}
    assert results["calibration_fit"]["scale"] != 1.0  # the Platt scaling was fitted and stored
    classifier = load_classifier(first)
    assert classifier.config.calibration_scale == pytest.approx(results["calibration_fit"]["scale"])
    assert classifier.config.encoder == "use-multilingual-v3"
    card = (first / "README.md").read_text()
    assert "| en-ko:gettext |" in card and "reliability.png" in card and (first / "rejected_by_kind.png").is_file()


@pytest.mark.parametrize(
    "source, target",
    [
        ("Delete 3 files?", "3 Dateien löschen?"),
        ("Open the file", "ファイルを開く"),
        ("Save changes", "保存更改"),
        ("Print the document", "문서를 인쇄합니다"),
        ("Mixed 漢字 and かな text", "Ελληνικά κείμενα"),
    ],
)
def test_the_length_features_weigh_scripts_as_the_length_filters_do(source, target):
    """The classifier's Latin-equivalent lengths are the length filters' (mining.filters.SCRIPT_WEIGHTS): a
    classifier and a filter that disagreed on what a long Japanese line is would judge one pair two ways."""
    import math

    from bitext_hf.mining.filters import weighted_length

    features = dict(zip(SURFACE, text_features(source, target)))
    source_length, target_length = weighted_length(source), weighted_length(target)
    assert features["weighted_length_ratio"] == pytest.approx(abs(math.log((1 + source_length) / (1 + target_length))))
    assert features["shorter_length"] == pytest.approx(math.log1p(min(source_length, target_length)))


def test_classifier_for_run_steps_the_default_aside_only_where_asked():
    """score rates pairs unasked: the default classifier steps aside for another encoder with a line; mine and align
    asked for a classifier: one that reads another encoder's cosines is refused there."""
    from bitext_hf.mining.quality import classifier_for_run

    classifier, note = classifier_for_run("default", ["use-multilingual-v3"])
    assert classifier is not None and note is None
    classifier, note = classifier_for_run("default", ["my-encoder"], default_steps_aside=True)
    assert classifier is None and "reads the cosines of use-multilingual-v3, not of my-encoder" in note
    with pytest.raises(UsageError, match="trained on the cosines of the encoder"):
        classifier_for_run("default", ["use-multilingual-v3", "my-encoder"])
    assert classifier_for_run("default", [])[0] is not None  # both sides given as embeddings: the user vouches
