"""Tests of recipes/train_onealigner.py: data preparation, a tiny end-to-end run, and exact resumption."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel

import bitext_hf  # noqa: F401  (registers the Auto classes)
from bitext_hf.modeling.onealigner import OneAlignerModel
from bitext_hf.training import LoopArguments, parse_args

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "train_onealigner.py"


@pytest.fixture(scope="module")
def recipe():
    spec = importlib.util.spec_from_file_location("train_onealigner", RECIPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_onealigner"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def data_files(tmp_path, tiny_parallel_corpus_by_language, tiny_tokenizer):
    # Training pairs use English sentences 0-13, the en-es evaluation set sentences 14-19 (no overlap by design).
    files = {}
    for language, pairs in tiny_parallel_corpus_by_language.items():
        pairs = pairs[14:] if language == "es" else pairs[:14]
        path = tmp_path / f"en-{language}.tsv"
        path.write_text("".join(f"{english}\t{translation}\n" for english, translation in pairs), encoding="utf-8")
        files[language] = path
    tokenizer_dir = tmp_path / "tokenizer"
    tiny_tokenizer.save_pretrained(tokenizer_dir)
    files["tokenizer"] = tokenizer_dir
    return files


def recipe_args(recipe, files, output_dir: Path, *extra: str):
    return parse_args(
        recipe.ScriptArguments,
        LoopArguments,
        args=[
            "--train_pairs", f"en-fr={files['fr']}", f"en-de={files['de']}",
            "--eval_pairs", f"en-es={files['es']}",
            "--held_out", "4",
            "--min_tokens", "1",
            "--encoder", "random",
            "--tokenizer", str(files["tokenizer"]),
            "--hidden_size", "32", "--num_hidden_layers", "2", "--num_attention_heads", "2",
            "--intermediate_size", "64", "--layer", "2", "--max_seq_length", "32", "--eval_batch_size", "16",
            "--output_dir", str(output_dir),
            "--per_device_train_batch_size", "8", "--learning_rate", "1e-3", "--max_steps", "4",
            "--save_steps", "2", "--logging_steps", "1", "--report_to", "jsonl", "--disable_tqdm", "true",
            *extra,
        ],
    )  # fmt: skip


def test_recipe_trains_evaluates_saves_and_resumes_exactly(recipe, data_files, tmp_path):
    first_dir = tmp_path / "uninterrupted"
    results = recipe.main(*recipe_args(recipe, data_files, first_dir))
    assert results["global_step"] == 4
    assert results["data"]["eval_sets"] == {"en-es:en-es.tsv": 6, "en-fr:held-out": 4, "en-de:held-out": 4}
    assert results["initial"]["average/accuracy"] >= 0.0 and "en-es" in next(iter(results["final"]))
    final = results["final"]
    for key in ("average/accuracy", "average/xsim", "average/ablation_mean_pool_norm_accuracy"):
        assert key in final
    assert 0.0 <= final["average/accuracy"] <= 1.0
    saved = json.loads((first_dir / recipe.RESULTS_FILE).read_text())
    assert saved["final"] == pytest.approx(final)
    assert "accuracy (%)" in (first_dir / "README.md").read_text()
    loaded = AutoModel.from_pretrained(first_dir)
    assert isinstance(loaded, OneAlignerModel) and loaded.config.layer == 2
    assert (first_dir / "modules.json").exists() and (first_dir / "checkpoint-2").is_dir()
    assert any('"loss"' in line for line in (first_dir / "logs.jsonl").read_text().splitlines())

    resumed_dir = tmp_path / "resumed"
    resumed = recipe.main(
        *recipe_args(
            recipe,
            data_files,
            resumed_dir,
            "--resume_from_checkpoint",
            str(first_dir / "checkpoint-2"),
            "--eval_before_training",
            "false",
            "--ablation",
            "false",
        )
    )
    assert resumed["global_step"] == 4
    expected = load_file(first_dir / "model.safetensors")
    actual = load_file(resumed_dir / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, actual[name]), name


def test_prepare_data_removes_overlap_samples_budget_and_filters_short(recipe, data_files, tmp_path):
    script_args, _ = recipe_args(recipe, data_files, tmp_path / "out", "--example_budget", "10", "--min_tokens", "6")
    script_args = dataclasses.replace(script_args, eval_pairs=[])
    data, tokenizer = recipe.prepare_data(script_args, recipe.build_tokenizer_factory(script_args), seed=0)
    eval_sentences = {sentence for pair in data.eval_sets.values() for side in pair for sentence in side}
    assert set(data.eval_sets) == {"en-fr:held-out", "en-de:held-out"}
    # 2 x 14 pairs, 4 held out of each; held-out English sentences also remove their other-language twins.
    assert data.stats["removed_eval_overlap"] > 0
    assert sum(data.stats["available_per_pair"].values()) == 2 * (14 - 4) - data.stats["removed_eval_overlap"]
    assert data.stats["sampled"] == 10
    assert data.stats["train_examples"] == 10 - data.stats["removed_short"]
    for example in data.train_examples:
        for key in ("input_ids", "target_input_ids"):
            assert len(example[key]) - 2 >= 6
            assert tokenizer.decode(example[key], skip_special_tokens=True) not in eval_sentences


def test_select_pairs_top_k_and_centre(recipe):
    pair_data = {"en-fr=a": [("x", "y")] * 5, "fr-de=b": [("x", "y")] * 9, "en-de=c": [("x", "y")] * 7}
    assert recipe.select_pairs(pair_data, 0, "any") == ["fr-de=b", "en-de=c", "en-fr=a"]
    assert recipe.select_pairs(pair_data, 1, "any") == ["fr-de=b"]
    assert recipe.select_pairs(pair_data, 1, "english") == ["en-de=c"]
    assert recipe.select_pairs(pair_data, 0, "non_english") == ["fr-de=b"]
    with pytest.raises(recipe.OneAlignerDataError, match="non-english-centred"):
        recipe.select_pairs({"en-fr=a": [("x", "y")]}, 0, "non_english")


def test_gettext_pairs_without_english_are_pivoted(recipe, monkeypatch):
    catalogs = {
        "fr": [("Open", "Ouvrir"), ("Close", "Fermer"), ("Save", "Enregistrer")],
        "de": [("Open", "Öffnen"), ("Save", "Speichern"), ("Quit", "Beenden")],
    }
    monkeypatch.setattr(recipe, "gettext_pairs", lambda language: catalogs[language])
    assert recipe.load_pairs("fr-de=gettext") == [("Ouvrir", "Öffnen"), ("Enregistrer", "Speichern")]
    assert recipe.load_pairs("de-en=gettext")[0] == ("Öffnen", "Open")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--train_pairs", "fr=gettext"], "SRC-TGT=SOURCE"),
        (["--train_pairs", "fr-fr=gettext"], "with itself"),
        (["--centre", "french"], "centre"),
        (["--example_budget", "0"], "example_budget"),
    ],
)
def test_bad_arguments(recipe, flags, message):
    with pytest.raises(recipe.OneAlignerDataError, match=message):
        parse_args(recipe.ScriptArguments, LoopArguments, args=["--output_dir", "unused", *flags])


def test_mismatched_line_aligned_files(recipe, tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("un\n", encoding="utf-8")
    with pytest.raises(recipe.OneAlignerDataError, match="2 lines but"):
        recipe.load_pairs(f"en-fr={tmp_path / 'a.txt'},{tmp_path / 'b.txt'}")


def test_eval_min_words_keeps_short_pairs_for_training_only(recipe, data_files, tmp_path):
    script_args, _ = recipe_args(recipe, data_files, tmp_path / "out", "--eval_min_words", "5")
    data, _ = recipe.prepare_data(script_args, recipe.build_tokenizer_factory(script_args), seed=0)
    for sources, targets in data.eval_sets.values():
        assert sources and all(len(text.split()) >= 5 for text in (*sources, *targets))
    assert data.stats["eval_sets"]["en-fr:held-out"] == 4
    with pytest.raises(recipe.OneAlignerDataError, match="words on both sides"):
        recipe.prepare_data(
            dataclasses.replace(script_args, eval_min_words=50), recipe.build_tokenizer_factory(script_args), seed=0
        )
