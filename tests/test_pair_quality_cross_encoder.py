"""The pair classifier's cross-encoder variant: its calibration folded into the head (exact, for the heads of BERT and
XLM-R), its folder recognised by ``load_classifier`` and loaded by transformers' and sentence-transformers' own
classes with the same probabilities, the jobs taking it with any encoder (it reads the texts only), its refusals, and
the recipe end to end (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines

from bitext_hf.errors import EXIT_ENCODER, EXIT_OK, EXIT_USAGE, EncoderLoadError, UsageError
from bitext_hf.families.pair_quality.arguments import CrossEncoderArguments
from bitext_hf.families.pair_quality.cross_encoder import build_cross_encoder, tokenized_pairs
from bitext_hf.mining.quality import check_classifier_encoder, load_classifier
from bitext_hf.mining.quality_cross_encoder import (
    CrossEncoderClassifier,
    cross_encoder_logits,
    fold_calibration,
)

PAIRS = [
    ("Delete 3 files?", "3 Dateien löschen?"),
    ("Open the file", "Datei öffnen"),
    ("Save", "Speichern"),
    ("The quick brown fox jumps over the lazy dog", "Öffnen"),
]


def _arguments(base: str, **overrides) -> CrossEncoderArguments:
    settings = {"train_pairs": ["en-de=gettext"], "eval_pairs": [], "base_model": base, "max_length": 32}
    return CrossEncoderArguments(**{**settings, **overrides})


def _built(base: str, tmp_path: Path, **overrides):
    data = SimpleNamespace(stats={"train_languages": ["de"]})
    training = SimpleNamespace(seed=3, output_dir=str(tmp_path / "run"))
    return build_cross_encoder(_arguments(base, **overrides), data, training, resuming=False)


@pytest.fixture(scope="module")
def saved_cross_encoder(tmp_path_factory, tiny_model_dir) -> Path:
    """A cross-encoder on the tiny XLM-R, calibrated (folded), saved as the recipe saves it."""
    from bitext_hf.hub import save_for_hub

    folder = tmp_path_factory.mktemp("cross-encoder")
    model, tokenizer = _built(str(tiny_model_dir), folder)
    fold_calibration(model, 3.0, -0.5)
    save_for_hub(model, tokenizer, folder / "model", model_card="# test\n", remote_code=False)
    return folder / "model"


def _bert(tmp_path: Path, tiny_tokenizer) -> Path:
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, pad_token_id=tiny_tokenizer.pad_token_id,
    )  # fmt: skip
    BertModel(config).save_pretrained(tmp_path / "bert")
    tiny_tokenizer.save_pretrained(tmp_path / "bert")
    return tmp_path / "bert"


@pytest.mark.parametrize("architecture", ["xlm-roberta", "bert"])
def test_the_calibration_folded_into_the_head_is_the_platt_scaling(
    architecture, tmp_path, tiny_model_dir, tiny_tokenizer
):
    base = str(tiny_model_dir) if architecture == "xlm-roberta" else str(_bert(tmp_path, tiny_tokenizer))
    model, tokenizer = _built(base, tmp_path)
    sources, targets = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    before = cross_encoder_logits(model, tokenizer, sources, targets, max_length=32)
    assert np.ptp(before) > 0  # the pairs get different logits: the check below could fail
    fold_calibration(model, 2.5, -0.7)
    after = cross_encoder_logits(model, tokenizer, sources, targets, max_length=32)
    np.testing.assert_allclose(after, 2.5 * before - 0.7, rtol=1e-5, atol=1e-5)


def test_logits_keep_the_order_given_whatever_the_batches(saved_cross_encoder):
    classifier = load_classifier(saved_cross_encoder)
    sources, targets = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    one_by_one = [
        cross_encoder_logits(classifier.model, classifier.tokenizer, [s], [t], max_length=32)[0]
        for s, t in zip(sources, targets)
    ]
    batched = cross_encoder_logits(
        classifier.model, classifier.tokenizer, sources, targets, max_length=32, batch_size=3
    )
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-5, atol=1e-5)


def test_the_saved_classifier_loads_as_a_cross_encoder_with_the_same_probabilities(saved_cross_encoder):
    from sentence_transformers import CrossEncoder
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    classifier = load_classifier(saved_cross_encoder)
    assert isinstance(classifier, CrossEncoderClassifier)
    assert classifier.config.max_length == 32 and classifier.config.languages == ("de",)
    assert classifier.config.encoder is None and classifier.config.reads_scores is False
    config = json.loads((saved_cross_encoder / "config.json").read_text())
    assert "auto_map" not in config and config["architectures"] == ["XLMRobertaForSequenceClassification"]
    sources, targets = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    ours = classifier.score(sources, targets).numpy()

    model = AutoModelForSequenceClassification.from_pretrained(saved_cross_encoder).eval()
    tokenizer = AutoTokenizer.from_pretrained(saved_cross_encoder)
    inputs = tokenizer(sources, targets, truncation=True, padding=True, return_tensors="pt")
    with torch.inference_mode():
        theirs = torch.sigmoid(model(**inputs).logits[:, 0]).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    cross_encoder = CrossEncoder(str(saved_cross_encoder), device="cpu")
    assert cross_encoder.max_length == 32
    np.testing.assert_allclose(cross_encoder.predict(PAIRS), ours, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("transformers_4", [False, True])
def test_it_loads_without_bitext_hf_under_transformers_4_and_5(transformers_4, saved_cross_encoder, tmp_path):
    """Users load it with transformers and sentence-transformers only, old or new: the same probabilities."""
    from remote_code_tf4 import ST5_VERSIONS, run_without_bitext_hf

    expected = load_classifier(saved_cross_encoder).score([p[0] for p in PAIRS], [p[1] for p in PAIRS]).tolist()
    code = f"""
import json, transformers, sentence_transformers
from sentence_transformers import CrossEncoder
model = CrossEncoder({str(saved_cross_encoder)!r}, device="cpu")
scores = model.predict({PAIRS!r}).tolist()
print(json.dumps([transformers.__version__, sentence_transformers.__version__, scores]))
"""
    version, _, scores = run_without_bitext_hf(
        code,
        cwd=tmp_path,
        transformers_4=transformers_4,
        sentence_transformers=ST5_VERSIONS[-1] if transformers_4 else None,
    )
    assert version.startswith("4.57") if transformers_4 else int(version.split(".")[0]) >= 5
    assert scores == pytest.approx(expected, abs=1e-5)


def test_a_cross_encoder_takes_any_encoders_pairs(saved_cross_encoder):
    classifier = load_classifier(saved_cross_encoder)
    check_classifier_encoder(classifier, "any/encoder", str(saved_cross_encoder))  # no refusal: it reads no cosine


def test_the_cross_encoder_arguments_refuse_what_cannot_work():
    for overrides, message in (
        ({"base_model": " "}, "--base_model is empty"),
        ({"max_length": 0}, "--max_length must be >= 1"),
        ({"max_length": 100_000}, "more tokens than any encoder base"),
        ({"score_batch_size": 0}, "--score_batch_size must be >= 1"),
        ({"negative_kinds": ["typo"]}, "--negative_kinds"),
    ):
        with pytest.raises(UsageError, match=message):
            _arguments("random", **overrides)


def test_the_random_base_trains_its_tokenizer_on_the_pairs(tmp_path):
    import datasets

    data = SimpleNamespace(
        stats={"train_languages": ["de"]},
        train=datasets.Dataset.from_dict(
            {"source": [p[0] for p in PAIRS] * 5, "target": [p[1] for p in PAIRS] * 5, "labels": [1.0, 1, 1, 0] * 5}
        ),
    )
    training = SimpleNamespace(seed=3, output_dir=str(tmp_path))
    model, tokenizer = build_cross_encoder(_arguments("random"), data, training, resuming=False)
    assert (tmp_path / "tokenizer" / "tokenizer.json").is_file() and model.config.num_labels == 1
    tokenized = tokenized_pairs(data.train, tokenizer, 32)
    assert set(tokenized.column_names) == {"input_ids", "attention_mask", "labels"}
    assert max(len(ids) for ids in tokenized["input_ids"]) <= 32


# ---------------------------------------------------------------------------------------------------- the jobs


@pytest.fixture
def fakes(monkeypatch):
    return install_fake_encoders(monkeypatch)


def test_score_writes_the_cross_encoders_quality_with_any_encoder(capsys, fakes, saved_cross_encoder, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(SOURCES, TARGETS)), encoding="utf-8")
    out = tmp_path / "o.tsv"
    code, _, err = run(
        capsys, "score", "--pairs", str(pairs), "--out", str(out), "--model", "my/encoder",
        "--classifier", str(saved_cross_encoder), "--k", "2",
    )  # fmt: skip
    assert code == EXIT_OK, err
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0][-1] == "quality"
    written = {(row[3], row[4]): float(row[-1]) for row in rows[1:]}
    expected = load_classifier(saved_cross_encoder).score(list(SOURCES), list(TARGETS)).numpy()
    for source, target, probability in zip(SOURCES, TARGETS, expected):
        assert written[(source, target)] == pytest.approx(float(probability), abs=1e-6)


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_the_converted_cross_encoder_gives_the_same_probabilities(saved_cross_encoder, backend):
    pytest.importorskip("onnxruntime" if backend == "onnx" else "openvino")
    sources, targets = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    expected = load_classifier(saved_cross_encoder).score(sources, targets).numpy()
    converted = load_classifier(saved_cross_encoder, backend=backend)
    assert converted.runner is not None
    # OpenVINO computes in bf16 where the CPU has it natively (quantize auto), as for the encoders.
    tolerance = 1e-5 if backend == "onnx" or converted.runner.quantize == "none" else 2e-2
    np.testing.assert_allclose(converted.score(sources, targets).numpy(), expected, atol=tolerance)


def test_bert_token_types_are_computed_inside_the_converted_graph(tmp_path, tiny_tokenizer):
    """BERT reads which side a token is on: the converted graph takes ids and mask only, and must compute them."""
    pytest.importorskip("onnxruntime")
    from bitext_hf.mining.quality_cross_encoder import converted_logits

    model, tokenizer = _built(str(_bert(tmp_path, tiny_tokenizer)), tmp_path)
    with torch.no_grad():
        model.bert.embeddings.token_type_embeddings.weight.normal_(0, 1.0)  # make the types matter
    sources, targets = [p[0] for p in PAIRS], [p[1] for p in PAIRS]
    if "token_type_ids" not in tokenizer.model_input_names:
        tokenizer.model_input_names = [*tokenizer.model_input_names, "token_type_ids"]
    runner = converted_logits(model, tokenizer, "onnx", "none", 1)
    expected = cross_encoder_logits(model, tokenizer, sources, targets, max_length=32)
    np.testing.assert_allclose(
        cross_encoder_logits(model, tokenizer, sources, targets, max_length=32, runner=runner), expected, atol=1e-4
    )


@pytest.mark.parametrize(
    "command, options, message",
    [
        ("score", ["--classifier", "default", "--classifier-backend", "onnx"], "a light classifier runs in torch"),
        ("score", ["--classifier", "none", "--classifier-backend", "onnx"], "--classifier-backend onnx runs a"),
        ("mine", ["--classifier-backend", "openvino"], "--classifier-backend openvino runs a classifier"),
    ],
)
def test_a_classifier_backend_that_cannot_act_is_refused(capsys, fakes, tmp_path, command, options, message):
    src = write_lines(tmp_path / "src.txt", SOURCES)
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    inputs = ["--src", src, "--tgt", tgt]
    code, _, err = run(capsys, command, *inputs, "--out", str(tmp_path / "o.tsv"), *options)
    assert code == EXIT_USAGE and message in err and err.count("\n") == 1, err
    assert fakes.n_encoded == 0 and not (tmp_path / "o.tsv").exists()


def test_mine_takes_a_cross_encoder_with_any_k_and_margin(capsys, fakes, saved_cross_encoder, tmp_path):
    src = write_lines(tmp_path / "src.txt", SOURCES)
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    out = tmp_path / "m.tsv"
    code, _, err = run(
        capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(out), "--classifier", str(saved_cross_encoder),
        "--k", "3", "--margin", "distance",
    )  # fmt: skip
    assert code == EXIT_OK, err
    assert out.read_text(encoding="utf-8").splitlines()[0].split("\t")[-1] == "quality"
    assert json.loads((tmp_path / "m.tsv.meta.json").read_text())["classifier"] == str(saved_cross_encoder)


def test_align_rates_each_beads_joined_texts_with_a_cross_encoder(capsys, fakes, saved_cross_encoder, tmp_path):
    src = write_lines(tmp_path / "doc.en", ["cat|en", "dog|en", "tree|en", "house|en"])
    tgt = write_lines(tmp_path / "doc.de", ["cat|de", "dog|de tree|de", "extra|de", "house|de"])
    out = tmp_path / "o.jsonl"
    code, _, err = run(
        capsys, "align", "--src", src, "--tgt", tgt, "--no-cache", "--out", str(out), "--model", "my/encoder",
        "--classifier", str(saved_cross_encoder),
    )  # fmt: skip
    assert code == EXIT_OK, err
    beads = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    links = [bead for bead in beads if bead["src"] and bead["tgt"]]
    expected = load_classifier(saved_cross_encoder).score([b["src"] for b in links], [b["tgt"] for b in links])
    assert [bead["quality"] for bead in links] == pytest.approx(expected.tolist(), abs=1e-6)
    assert all(bead["quality"] == 0.0 for bead in beads if not (bead["src"] and bead["tgt"]))


def _corrupted(saved: Path, tmp_path: Path, how: str) -> Path:
    """A copy of the saved cross-encoder, damaged in one way."""
    import shutil

    folder = tmp_path / how
    shutil.copytree(saved, folder)
    config = json.loads((folder / "config.json").read_text())
    if how == "pickle":
        (folder / "model.safetensors").unlink()
        (folder / "pytorch_model.bin").write_bytes(b"a pickle is never loaded")
    elif how == "fifo":
        (folder / "model.safetensors").unlink()
        os.mkfifo(folder / "model.safetensors")
    elif how == "two_labels":
        config["id2label"] = {"0": "a", "1": "b"}
        (folder / "config.json").write_text(json.dumps(config))
    elif how == "remote_code":
        config["auto_map"] = {"AutoModelForSequenceClassification": "modeling_evil.Evil"}
        config["model_type"] = "evil"
        (folder / "config.json").write_text(json.dumps(config))
    elif how == "truncated":
        data = (folder / "model.safetensors").read_bytes()
        (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    return folder


@pytest.mark.parametrize(
    "how, message",
    [
        ("pickle", "model.safetensors"),
        ("fifo", "model.safetensors"),
        ("two_labels", "one output"),
        ("remote_code", "never run unasked"),
        ("truncated", "model.safetensors"),
    ],
)
def test_a_damaged_cross_encoder_is_refused_in_one_line_before_encoding(
    capsys, fakes, saved_cross_encoder, tmp_path, how, message
):
    folder = _corrupted(saved_cross_encoder, tmp_path, how)
    with pytest.raises(EncoderLoadError, match=message):
        load_classifier(folder)
    pairs = write_lines(tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS)])
    code, _, err = run(
        capsys, "score", "--pairs", pairs, "--out", str(tmp_path / "o.tsv"), "--classifier", str(folder)
    )
    assert code == EXIT_ENCODER and err.count("\n") == 1, err
    assert fakes.n_encoded == 0 and not (tmp_path / "o.tsv").exists()


def test_the_recipe_refuses_lora_and_evaluation_during_training(tmp_path):
    from transformers import TrainingArguments

    from bitext_hf.families.pair_quality.cross_encoder import check_cross_encoder_arguments
    from bitext_hf.training import ModelArguments

    script_args = _arguments("random")
    training = TrainingArguments(output_dir=str(tmp_path), report_to="none")
    with pytest.raises(UsageError, match="--use_peft"):
        check_cross_encoder_arguments(script_args, training, ModelArguments(use_peft=True))
    training = TrainingArguments(output_dir=str(tmp_path), report_to="none", eval_strategy="steps")
    with pytest.raises(UsageError, match="--eval_strategy"):
        check_cross_encoder_arguments(script_args, training, ModelArguments())


# ------------------------------------------------------------------------------------------------------ the recipe


@pytest.mark.slow
def test_the_recipe_trains_calibrates_and_exports_the_same_model_for_the_same_seed(tmp_path: Path):
    """The smoke configuration end to end, twice: a cross-encoder that loads with transformers' and
    sentence-transformers' classes, its calibration folded, its card and held-out metrics, the same weights from the
    same seed."""
    from sentence_transformers import CrossEncoder

    root = Path(__file__).resolve().parents[1]
    outputs = []
    for name in ("a", "b"):
        done = subprocess.run(
            [sys.executable, str(root / "recipes" / "train_pair_quality_cross_encoder.py"), "--config",
             str(root / "recipes" / "configs" / "pair_quality_cross_encoder-smoke.yaml"),
             "--output_dir", str(tmp_path / name)],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(tmp_path / name)
    first, second = outputs
    assert (first / "model.safetensors").read_bytes() == (second / "model.safetensors").read_bytes()
    results = json.loads((first / "quality_results.json").read_text())
    assert set(results["en-ko:gettext"]) >= {"auc", "mcc", "ece", "kept", "cosine/auc", "margin/auc"}
    assert results["calibration_fit"]["ece_after"] <= results["calibration_fit"]["ece_before"] + 1e-9
    classifier = load_classifier(first)
    assert isinstance(classifier, CrossEncoderClassifier) and classifier.config.base == "random"
    assert CrossEncoder(str(first), device="cpu").predict([PAIRS[0]]).shape == (1,)
    card = (first / "README.md").read_text()
    assert "cross-encoder" in card and "| en-ko:gettext |" in card and "reliability.png" in card
