"""Tests of recipes/train_musr.py: both stages end to end on tiny local files (outputs load with AutoModel and
sentence-transformers, stage 2 starts from stage 1 with a fresh optimizer and scheduler), resuming after stage 1,
temperature sampling, one-line errors for bad input, and the offline gettext smoke config (slow)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, TrainingArguments

import bitext_hf.modeling  # noqa: F401  (registers the Auto classes)
from bitext_hf.families.musr.recipe import evaluate
from bitext_hf.modeling.musr import MuSREncoderDecoder
from bitext_hf.training import run_recipe

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "train_musr.py"
SIZES = {"fr": 20, "de": 20, "es": 12}  # different sizes: the temperature matters


@pytest.fixture(scope="module")
def recipe():
    spec = importlib.util.spec_from_file_location("train_musr", RECIPE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_musr"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def files(tmp_path, tiny_parallel_corpus_by_language, tiny_tokenizer):
    paths = {}
    for language, size in SIZES.items():
        pairs = tiny_parallel_corpus_by_language[language][:size]
        paths[language] = tmp_path / f"{language}.tsv"  # English<TAB>xx
        paths[language].write_text("".join(f"{en}\t{xx}\n" for en, xx in pairs), encoding="utf-8")
    tiny_tokenizer.save_pretrained(tmp_path / "tokenizer")
    paths["tokenizer"] = tmp_path / "tokenizer"
    return paths


def flags(files, output_dir: Path, *extra: str) -> list[str]:
    return [
        "--train_pairs",
        *(f"{lang}={files[lang]}" for lang in SIZES),
        "--tokenizer",
        str(files["tokenizer"]),
        "--held_out",
        "4",
        "--pivot",
        "fr",
        "--train_examples",
        "64",
        "--temperature",
        "2.0",
        "--alpha",
        "1.0",
        "--hidden_size",
        "16",
        "--num_encoder_layers",
        "1",
        "--num_decoder_layers",
        "1",
        "--num_attention_heads",
        "2",
        "--encoder_ffn_dim",
        "32",
        "--decoder_ffn_dim",
        "64",
        "--max_seq_length",
        "32",
        "--output_dir",
        str(output_dir),
        "--use_cpu",
        "true",
        "--per_device_train_batch_size",
        "8",
        "--learning_rate",
        "1e-3",
        "--max_steps",
        "3",
        "--logging_steps",
        "1",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--seed",
        "3",
        *extra,
    ]


def run(recipe, arguments: list[str]):
    return run_recipe(
        recipe.main, recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=arguments
    )


def test_two_stages_end_to_end(recipe, files, tmp_path):
    from sentence_transformers import SentenceTransformer

    output_dir = tmp_path / "out"
    results = run(recipe, flags(files, output_dir))
    # metrics after each stage: English and pivot directions, BUCC-style F1, per language and averaged
    for stage in ("stage1", "stage2"):
        final = results[stage]["final"]
        for key in (
            "xsim_en",
            "accuracy_en",
            "xsim_pivot",
            "accuracy_pivot",
            "bucc_f1_en",
            "xsim_es-en",
            "accuracy_de-fr",
            "xsim_es-fr",
            "bucc_f1_de-en",
        ):
            assert key in final, (stage, key)
        assert "xsim_fr-fr" not in final
    assert json.loads((output_dir / "eval_results.json").read_text())["stage2"] == results["stage2"]
    # stage 2 starts from the saved stage-1 model: evaluating that model gives stage 1's numbers
    stage1 = MuSREncoderDecoder.from_pretrained(output_dir / "stage1")
    assert evaluate(stage1, _evaluator(recipe, files, stage1)) == results["stage1"]["final"]
    # ... with a fresh optimizer and scheduler: a second Trainer run whose steps and learning rate start over
    first1, first2 = results["stage1"]["log_history"][0], results["stage2"]["log_history"][0]
    assert first1["step"] == first2["step"] == 1 and first1["learning_rate"] == first2["learning_rate"]
    assert "kl" in first2 and "kl" not in first1 and first2["ce"] > 0
    # the final model is the stage-2 one, loadable with its tokenizer; the encoder alone as sentence-transformers
    model = AutoModel.from_pretrained(output_dir).eval()
    assert isinstance(model, MuSREncoderDecoder) and model.decoder is not None
    assert any(not torch.equal(a, b) for a, b in zip(model.state_dict().values(), stage1.state_dict().values()))
    texts = ["The cat sleeps on the sofa.", "Le chat dort sur le canapé."]
    st_model = SentenceTransformer(str(output_dir / "sentence-transformers"), trust_remote_code=True, device="cpu")
    torch.testing.assert_close(torch.as_tensor(st_model.encode(texts)), model.encode(texts), atol=1e-5, rtol=1e-4)
    assert "decoder" not in json.dumps(
        list(AutoModel.from_pretrained(output_dir / "sentence-transformers").state_dict())
    )


def _evaluator(recipe, files, model):
    from transformers import AutoTokenizer

    from bitext_hf.families.musr import MuSREvaluator, load_many_to_one, multiway_held_out

    data = multiway_held_out(load_many_to_one([f"{lang}={files[lang]}" for lang in SIZES]), 4, 3)
    tokenizer = AutoTokenizer.from_pretrained(files["tokenizer"])
    return MuSREvaluator(tokenizer, data.held_out, "fr", max_length=32)


def test_temperature_sampling_follows_the_formula(recipe, files, tmp_path):
    results = run(recipe, flags(files, tmp_path / "out", "--max_steps", "1"))
    data = results["data"]
    sizes = np.array([data["train_pairs"][lang] for lang in SIZES], dtype=float)
    assert sizes.tolist() == [16, 16, 8]  # 4 multi-way sentences held out of each
    expected = (sizes / sizes.sum()) ** (1 / 2.0)
    expected /= expected.sum()
    actual = [data["sampling_probabilities"][lang] for lang in SIZES]
    np.testing.assert_allclose(actual, expected)
    assert data["train_examples"] == [64, 64]


def test_stage2_english_copies_are_english_to_english_pairs(files, tmp_path):
    """The control's option: stage 2 gains an English -> English copy of each of its pairs, tokenized as every pair
    is (``<s> text </s>``, no language tag), a 1:1 mix; stage 1, the stage-2 pairs and the default are unchanged."""
    from transformers import AutoTokenizer

    from bitext_hf.data import PairSet
    from bitext_hf.families.musr.data import english_copies
    from bitext_hf.families.musr.recipe import ScriptArguments, prepare_stages

    pairs = [PairSet("fr", "en", "t", ["un", "deux"], ["one", "two"]), PairSet("de", "en", "t", ["drei"], ["three"])]
    copies = english_copies(pairs)
    assert (copies.src_lang, copies.tgt_lang) == ("en", "en") and copies.src == copies.tgt == ["one", "two", "three"]

    def stages(**options):
        script_args = ScriptArguments(
            train_pairs=[f"{lang}={files[lang]}" for lang in SIZES],
            tokenizer=str(files["tokenizer"]),
            held_out=4,
            pivot="fr",
            train_examples=64,
            temperature=2.0,
            max_seq_length=32,
            **options,
        )
        return prepare_stages(script_args, 3, tmp_path, reuse_tokenizer=False)

    default, control = stages(), stages(stage2_english_copies=True)
    assert not ScriptArguments().stage2_english_copies and "stage2_english_copies" not in default.data
    assert control.examples[0] == default.examples[0]  # stage 1 never sees them
    pairs_count = len(default.examples[1])
    assert control.examples[1][:pairs_count] == default.examples[1]
    added = control.examples[1][pairs_count:]
    assert len(added) == pairs_count == control.data["stage2_english_copies"] == 64
    assert control.data["train_examples"] == [64, 128]
    # every copy is a stage-2 pair's English target, as the source too, with the special tokens of every pair
    tokenizer = AutoTokenizer.from_pretrained(files["tokenizer"])
    assert all(example["src_input_ids"] == example["tgt_input_ids"] for example in added)
    assert sorted(example["tgt_input_ids"] for example in added) == sorted(
        example["tgt_input_ids"] for example in default.examples[1]
    )
    assert all(example["src_input_ids"][0] == tokenizer.bos_token_id for example in added)
    assert all(example["src_input_ids"][-1] == tokenizer.eos_token_id for example in added)
    assert not any(example["src_input_ids"] == example["tgt_input_ids"] for example in default.examples[1])


@pytest.mark.slow
def test_resume_skips_a_finished_stage_1(recipe, files, tmp_path, caplog):
    output_dir = tmp_path / "out"
    run(recipe, flags(files, output_dir, "--max_steps", "1"))
    weights = (output_dir / "stage1" / "model.safetensors").read_bytes()
    caplog.set_level("INFO", logger="train_musr")
    results = run(recipe, flags(files, output_dir, "--max_steps", "1", "--resume_from_checkpoint", "auto"))
    assert "stage 1 is finished" in caplog.text
    assert (output_dir / "stage1" / "model.safetensors").read_bytes() == weights
    assert "log_history" not in results["stage1"] and results["stage2"]["final"]


def _error(recipe, arguments, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as raised:
        run(recipe, arguments)
    return raised.value.code, capsys.readouterr().err.strip()


def test_missing_english_side_is_one_line(recipe, files, tmp_path, capsys):
    (tmp_path / "a.fr").write_text("Bonjour.\nMerci.\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("Hallo.\nDanke.\n", encoding="utf-8")
    arguments = flags(files, tmp_path / "out", "--train_pairs", f"fr-de={tmp_path / 'a.fr'},{tmp_path / 'a.de'}")
    code, message = _error(recipe, arguments, capsys)
    assert code == 3 and len(message.splitlines()) == 1
    assert "no English side" in message and "fr-de" in message
    assert not (tmp_path / "out").exists()


def test_empty_line_names_file_and_line(recipe, files, tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("Hello.\tBonjour.\n\nThanks.\tMerci.\n", encoding="utf-8")
    code, message = _error(recipe, flags(files, tmp_path / "out", "--train_pairs", f"fr={bad}"), capsys)
    assert code == 3 and len(message.splitlines()) == 1 and str(bad) in message and "2" in message


def test_language_absent_from_the_vocabulary(recipe, files, tmp_path, tiny_parallel_corpus_by_language, capsys):
    russian = tmp_path / "ru.tsv"
    english = [en for en, _ in tiny_parallel_corpus_by_language["fr"]]
    rows = [f"{en}\tЭто предложение номер {i}\n" for i, en in enumerate(english)]
    russian.write_text("".join(rows), "utf-8")
    arguments = flags(files, tmp_path / "out", "--train_pairs", f"fr={files['fr']}", f"ru={russian}")
    code, message = _error(recipe, arguments, capsys)
    assert code == 3 and len(message.splitlines()) == 1
    assert "'ru'" in message and "absent from the vocabulary" in message


def test_bad_arguments_are_usage_errors(recipe, files, tmp_path, capsys):
    code, message = _error(recipe, flags(files, tmp_path / "out", "--pivot", "ja"), capsys)
    assert code == 2 and "--pivot ja" in message
    code, message = _error(recipe, flags(files, tmp_path / "out", "--temperature", "0"), capsys)
    assert code == 2 and "--temperature" in message
    code, message = _error(recipe, flags(files, tmp_path / "out", "--hidden_size", "15"), capsys)
    assert code == 2 and "divisible by num_attention_heads" in message and len(message.splitlines()) == 1
    code, message = _error(recipe, flags(files, tmp_path / "out", "--stage2_label_smoothing", "1"), capsys)
    assert code == 2 and "--stage2_label_smoothing" in message
    code, message = _error(recipe, flags(files, tmp_path / "out", "--stage1_patience", "0"), capsys)
    assert code == 2 and "--stage1_patience" in message


@pytest.mark.slow
def test_smoke_config_offline(recipe, tmp_path):
    started = time.perf_counter()
    output_dir = tmp_path / "smoke"
    results = run(
        recipe, ["--config", str(ROOT / "recipes" / "configs" / "musr-smoke.yaml"), "--output_dir", str(output_dir)]
    )
    assert time.perf_counter() - started < 300
    assert isinstance(AutoModel.from_pretrained(output_dir), MuSREncoderDecoder)
    assert results["stage2"]["final"]["accuracy_en"] > results["stage1"]["final"]["accuracy_en"] - 0.1
    assert results["data"]["languages"] == ["fr", "de", "it"]


@pytest.mark.slow
def test_resume_inside_stage_2_continues_exactly(recipe, files, tmp_path):
    output_dir = tmp_path / "out"
    saving = ("--max_steps", "2", "--save_strategy", "steps", "--save_steps", "1")
    run(recipe, flags(files, output_dir, *saving))
    expected = (output_dir / "model.safetensors").read_bytes()
    shutil.rmtree(output_dir / "stage2" / "checkpoint-2")  # interrupted after step 1 of stage 2
    # mark the checkpoint's log: a resumed run carries it on, a run started afresh would log step 1 again
    state_file = output_dir / "stage2" / "checkpoint-1" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state["log_history"][0]["loss"] = 123.0
    state_file.write_text(json.dumps(state))
    results = run(recipe, flags(files, output_dir, *saving, "--resume_from_checkpoint", "auto"))
    losses = [(entry["step"], entry["loss"]) for entry in results["stage2"]["log_history"] if "loss" in entry]
    assert [step for step, _ in losses] == [1, 2] and losses[0][1] == 123.0
    assert (output_dir / "model.safetensors").read_bytes() == expected  # bitwise the uninterrupted run


def test_defaults_are_the_protocol_that_showed_the_gain(recipe, files, tmp_path, capsys):
    """experiments/README.md's MuSR table: stage 1 to a plateau, stage 2 with the reference criterion's plain
    cross-entropy, alpha 1; each of the earlier protocol's settings one flag away."""
    from bitext_hf.families.musr.recipe import stage1_plateau

    defaults = recipe.ScriptArguments()
    assert defaults.alpha == 1.0 and defaults.stage2_label_smoothing == 0.0
    assert stage1_plateau(defaults) == 0.01
    assert stage1_plateau(dataclasses.replace(defaults, held_out=0)) == 0.0  # nothing to measure it on: off
    assert stage1_plateau(dataclasses.replace(defaults, stage1_plateau=0.0)) == 0.0
    assert stage1_plateau(dataclasses.replace(defaults, stage1_plateau=0.05)) == 0.05
    # asked for, with nothing to measure it on: refused, naming the way out
    code, message = _error(
        recipe, flags(files, tmp_path / "out", "--held_out", "0", "--stage1_plateau", "0.01"), capsys
    )
    assert code == 2 and "--stage1_plateau 0" in message and len(message.splitlines()) == 1


def test_the_card_says_how_each_stage_ran_and_gives_the_papers_numbers():
    from bitext_hf.families.musr.arguments import ScriptArguments
    from bitext_hf.families.musr.export import model_card

    final = {"xsim_en": 20.0, "accuracy_en": 0.8}
    plateau = {"every": 100, "min_improvement": 0.01, "patience": 3, "history": [], "stopped_at": 2600}
    results = {
        "data": {"pivot": "de", "train_pairs": {"fr": 10, "de": 10}, "train_examples": [96000, 96000]},
        "stage1": {"final": final, "log_history": [{"step": 2600, "loss": 2.0}], "plateau": plateau},
        "stage2": {"final": {**final, "xsim_en": 15.0}, "log_history": [{"step": 300, "loss": 1.0}]},
    }
    card = model_card(ScriptArguments(train_pairs=["fr=gettext", "de=gettext"]), results)
    assert "stage 1 stopped at a plateau at step 2600" in card
    assert "stage-2 label smoothing 0" in card and "Tatoeba-en 78.89 -> 82.69" in card
    unfinished = {**results, "stage1": {**results["stage1"], "plateau": {**plateau, "stopped_at": None}}}
    smoothed = ScriptArguments(train_pairs=["fr=gettext"], stage2_label_smoothing=None)
    card = model_card(smoothed, unfinished)
    assert "without reaching the plateau" in card and "stage-2 label smoothing the model's" in card
