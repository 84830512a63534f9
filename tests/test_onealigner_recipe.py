"""Tests of recipes/train_onealigner.py: data preparation, a tiny end-to-end run on BitextTrainer, exact resumption,
LoRA with adapter export, an intercepted push, MLM pre-training reuse and one-line errors."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel, TrainingArguments, XLMRobertaConfig, XLMRobertaModel

import bitext_hf.modeling  # noqa: F401  (registers the Auto classes)
from bitext_hf.data import PairSet
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.onealigner.data import load_data, select_pairs
from bitext_hf.families.onealigner.export import RESULTS_FILE
from bitext_hf.families.onealigner.recipe import tokenizer_factory
from bitext_hf.modeling.onealigner import OneAlignerModel
from bitext_hf.training import ModelArguments, parse_args, run_recipe
from bitext_hf.training.mlm import pretrain_mlm

RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "train_onealigner.py"
FIGURES = ("xsim_heatmap.png", "margin_distribution.png", "training_curve.png")


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


def recipe_flags(files, output_dir: Path, *extra: str) -> list[str]:
    return [
        "--train_pairs",
        f"en-fr={files['fr']}",
        f"en-de={files['de']}",
        "--eval_pairs",
        f"en-es={files['es']}",
        "--held_out",
        "4",
        "--min_tokens",
        "1",
        "--encoder",
        "random",
        "--tokenizer",
        str(files["tokenizer"]),
        "--hidden_size",
        "32",
        "--num_hidden_layers",
        "2",
        "--num_attention_heads",
        "2",
        "--intermediate_size",
        "64",
        "--layer",
        "2",
        "--max_seq_length",
        "32",
        "--eval_batch_size",
        "16",
        "--output_dir",
        str(output_dir),
        "--use_cpu",
        "true",
        "--per_device_train_batch_size",
        "8",
        "--learning_rate",
        "1e-3",
        "--max_steps",
        "4",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "2",
        "--save_steps",
        "2",
        "--logging_steps",
        "1",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--seed",
        "3",
        *extra,
    ]


def recipe_args(recipe, files, output_dir: Path, *extra: str):
    return parse_args(
        recipe.ScriptArguments, TrainingArguments, ModelArguments, args=recipe_flags(files, output_dir, *extra)
    )


def test_recipe_trains_evaluates_saves_and_resumes_exactly(recipe, data_files, tmp_path):
    first_dir = tmp_path / "uninterrupted"
    results = recipe.main(*recipe_args(recipe, data_files, first_dir))
    assert results["global_step"] == 4
    assert results["data"]["eval_sets"] == {"en-es:en-es.tsv": 6, "en-fr:held-out": 4, "en-de:held-out": 4}
    final = results["final"]
    for key in ("accuracy", "xsim", "ablation_mean_pool_norm_accuracy", "en-es:en-es.tsv/xsim"):
        assert key in final and key in results["initial"]
    assert 0.0 <= final["accuracy"] <= 1.0
    # Retrieval ran at eval_steps through the Trainer and was logged with the eval_ prefix.
    assert [entry["step"] for entry in results["eval_history"]] == [2, 4]
    assert all("eval_xsim" in entry for entry in results["eval_history"])
    saved = json.loads((first_dir / RESULTS_FILE).read_text())
    assert saved["final"] == pytest.approx(final)
    card = (first_dir / "README.md").read_text()
    assert "accuracy (%)" in card
    # The figures ship in the checkpoint and the card shows them: one xsim cell per evaluation set (the en-es file
    # and the held-out splits), the held-out margins, the training curve.
    for name in FIGURES:
        assert (first_dir / name).read_bytes().startswith(b"\x89PNG") and f"]({name})" in card, name
    assert "en→es" in card and "en→fr" in card and "held-out gold pairs" in card
    loaded = AutoModel.from_pretrained(first_dir)
    assert isinstance(loaded, OneAlignerModel) and loaded.config.layer == 2
    assert (first_dir / "modules.json").exists() and (first_dir / "checkpoint-2" / "trainer_state.json").is_file()

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
    assert resumed["global_step"] == 4 and resumed["initial"] == {}
    expected = load_file(first_dir / "model.safetensors")
    actual = load_file(resumed_dir / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, actual[name]), name


def test_lora_run_saves_an_adapter_and_a_merged_model(recipe, data_files, tmp_path):
    from peft import PeftModel

    torch.manual_seed(0)
    encoder_dir = tmp_path / "encoder"  # a "pretrained" encoder: LoRA fine-tunes one
    XLMRobertaModel(
        XLMRobertaConfig(
            vocab_size=400,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=40,
            pad_token_id=1,
        )
    ).save_pretrained(encoder_dir)
    output_dir = tmp_path / "lora"
    flags = ["--encoder", str(encoder_dir), "--use_peft", "true", "--lora_r", "4", "--ablation", "false"]
    script_args, training_args, model_args = recipe_args(recipe, data_files, output_dir, *flags)
    recipe.main(script_args, training_args, model_args)
    adapter = output_dir / "adapter"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    assert (output_dir / "checkpoint-4" / "adapter_model.safetensors").is_file()  # checkpoints hold the adapter only

    merged = AutoModel.from_pretrained(output_dir).eval()
    base = OneAlignerModel.from_encoder(str(encoder_dir), 2, max_seq_length=32).eval()
    reloaded = PeftModel.from_pretrained(
        OneAlignerModel.from_encoder(str(encoder_dir), 2, max_seq_length=32), str(adapter)
    ).eval()
    ids = torch.tensor([[0, 25, 37, 48, 2]])
    with torch.no_grad():
        merged_states = merged.token_states(ids)
        assert torch.allclose(reloaded.token_states(ids), merged_states, atol=1e-5)
        assert not torch.allclose(base.token_states(ids), merged_states, atol=1e-5)  # the adapter changed something


def test_push_to_hub_uploads_the_final_export_only(recipe, data_files, tmp_path, monkeypatch):
    import huggingface_hub

    uploads = []
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda self, repo_id, **kwargs: repo_id)

    def fake_upload_folder(self, *, repo_id, folder_path, **kwargs):
        uploads.append((repo_id, sorted(str(path.relative_to(folder_path)) for path in Path(folder_path).rglob("*"))))
        return "https://huggingface.co/fake/commit"

    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder)
    output_dir = tmp_path / "pushed"
    recipe.main(
        *recipe_args(
            recipe,
            data_files,
            output_dir,
            "--push_to_hub",
            "true",
            "--hub_model_id",
            "me/aligner",
            "--ablation",
            "false",
        )
    )
    (repo_id, files) = uploads[-1]  # one upload: the final export, not one per checkpoint
    assert len(uploads) == 1 and repo_id == "me/aligner"
    assert {"model.safetensors", "config.json", "README.md", "eval_results.json"} <= set(files)
    assert {f"figures/{name}" for name in FIGURES} <= set(files) or set(FIGURES) <= set(files)
    assert any(name.startswith("checkpoint-") for name in os.listdir(output_dir))  # the run kept checkpoints...
    assert not any(name.startswith(("checkpoint-", "training_args")) for name in files)  # ...which stay local


def test_load_data_removes_overlap_samples_budget_and_filters_short(recipe, data_files, tmp_path):
    script_args, _, _ = recipe_args(
        recipe, data_files, tmp_path / "out", "--example_budget", "10", "--min_tokens", "6"
    )
    script_args = dataclasses.replace(script_args, eval_pairs=[])
    data, tokenizer = load_data(script_args, tokenizer_factory(script_args, str(tmp_path), False), 0)
    eval_sentences = {sentence for pair in data.eval_sets.values() for side in pair for sentence in side}
    assert set(data.eval_sets) == {"en-fr:held-out", "en-de:held-out"}
    # 2 x 14 pairs, 4 held out of each; held-out English sentences also remove their other-language twins.
    assert data.stats["removed_eval_overlap"] > 0
    assert sum(data.stats["available_per_pair"].values()) == 2 * (14 - 4) - data.stats["removed_eval_overlap"]
    assert data.stats["sampled"] == 10
    assert data.stats["train_examples"] == 10 - data.stats["removed_short"]
    for example in data.train_examples:
        for key in ("src_input_ids", "tgt_input_ids"):
            assert len(example[key]) - 2 >= 6
            assert tokenizer.decode(example[key], skip_special_tokens=True) not in eval_sentences


def test_select_pairs_top_k_and_centre():
    def pairs(src: str, tgt: str, n: int) -> PairSet:
        return PairSet(src, tgt, "x", ["a"] * n, ["b"] * n)

    pair_data = {"en-fr=a": pairs("en", "fr", 5), "fr-de=b": pairs("fr", "de", 9), "de=c": pairs("de", "en", 7)}
    assert select_pairs(pair_data, 0, "any") == ["fr-de=b", "de=c", "en-fr=a"]
    assert select_pairs(pair_data, 1, "any") == ["fr-de=b"]
    assert select_pairs(pair_data, 1, "english") == ["de=c"]
    assert select_pairs(pair_data, 0, "non_english") == ["fr-de=b"]
    with pytest.raises(DataValidationError, match="non-english-centred"):
        select_pairs({"en-fr=a": pairs("en", "fr", 1)}, 0, "non_english")


@pytest.mark.parametrize(
    ("flags", "error", "message"),
    [
        (["--train_pairs", "fr"], DataValidationError, "LANG=SOURCE"),
        (["--train_pairs", "fr-fr=gettext"], DataValidationError, "with itself"),
        (["--centre", "french"], UsageError, "centre"),
        (["--example_budget", "0"], UsageError, "example_budget"),
        (["--lora_r", "0"], UsageError, "lora_r"),
        (["--dropout", "1"], UsageError, r"--dropout must be in \[0, 1\), got 1.0"),
    ],
)
def test_bad_arguments(recipe, flags, error, message):
    with pytest.raises(error, match=message):
        parse_args(recipe.ScriptArguments, TrainingArguments, ModelArguments, args=["--output_dir", "unused", *flags])


def test_errors_are_one_line_with_the_documented_exit_code(recipe, data_files, tmp_path, capsys):
    flags = recipe_flags(data_files, tmp_path / "out", "--resume_from_checkpoint", str(tmp_path / "nowhere"))
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(recipe.main, recipe.ScriptArguments, TrainingArguments, ModelArguments, args=flags)
    assert exit_info.value.code == UsageError.exit_code
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "error: --resume_from_checkpoint" in message and "nowhere" in message
    assert not (tmp_path / "out").exists()  # checked before any work


def test_evaluation_without_evaluation_sets_is_refused_before_any_work(recipe, data_files, tmp_path):
    script_args, training_args, model_args = recipe_args(recipe, data_files, tmp_path / "out", "--held_out", "0")
    script_args = dataclasses.replace(script_args, eval_pairs=[])
    with pytest.raises(UsageError, match="eval_strategy needs evaluation sets"):
        recipe.main(script_args, training_args, model_args)
    assert not (tmp_path / "out").exists()


def test_eval_min_words_keeps_short_pairs_for_training_only(recipe, data_files, tmp_path):
    script_args, _, _ = recipe_args(recipe, data_files, tmp_path / "out", "--eval_min_words", "5")
    factory = tokenizer_factory(script_args, str(tmp_path), False)
    data, _ = load_data(script_args, factory, seed=0)
    for sources, targets in data.eval_sets.values():
        assert sources and all(len(text.split()) >= 5 for text in (*sources, *targets))
    assert data.stats["eval_sets"]["en-fr:held-out"] == 4
    with pytest.raises(DataValidationError, match=r"words on both sides|evaluation filter"):
        load_data(dataclasses.replace(script_args, eval_min_words=50), factory, seed=0)


def test_mlm_pretraining_is_reused_when_its_result_exists(tiny_tokenizer, tmp_path, monkeypatch):
    config = XLMRobertaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=40,
        pad_token_id=1,
    )
    ids = [tiny_tokenizer(text)["input_ids"] for text in ["the cat sleeps", "a dog runs fast", "it rains"] * 4]
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, seed=1, disable_tqdm=True, report_to="none")
    settings = {"output_dir": tmp_path, "learning_rate": 1e-3, "batch_size": 4, "training_args": args}
    folder = pretrain_mlm(config, tiny_tokenizer, ids, steps=3, **settings)
    assert (folder / "model.safetensors").is_file() and XLMRobertaModel.from_pretrained(folder)
    import transformers

    monkeypatch.setattr(transformers.Trainer, "train", lambda self, *a, **k: pytest.fail("pre-trained again"))
    assert pretrain_mlm(config, tiny_tokenizer, ids, steps=3, **settings) == folder
    with pytest.raises(UsageError, match="other settings"):
        pretrain_mlm(config, tiny_tokenizer, ids, steps=5, **settings)
