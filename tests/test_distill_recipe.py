"""recipes/distill_wolof.py end to end on a tiny offline corpus: the checkpoint loads through AutoModel and
SentenceTransformer with the embeddings of the trained student, results and model card are written, bad input
fails with clear errors."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bitext_hf.families.laser3.export import RESULTS_FILE
from bitext_hf.modeling.laser3 import Laser3Student

REPO = Path(__file__).resolve().parent.parent
FIGURES = ("xsim_heatmap.png", "margin_distribution.png", "training_curve.png")


@pytest.fixture(scope="module")
def recipe():
    spec = importlib.util.spec_from_file_location("distill_wolof", REPO / "recipes" / "distill_wolof.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["distill_wolof"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def corpus_files(tiny_pair_specs):
    return list(tiny_pair_specs.values())


def tiny_args(recipe, corpus_files, output_dir, *extra):
    from transformers import TrainingArguments

    from bitext_hf.training import parse_args

    # Empty lists cannot be spelled on a command line: they come from a YAML file, as in the smoke config.
    config = Path(output_dir).parent / f"{Path(output_dir).name}.yaml"
    config.write_text("monolingual: []\neval_bitexts: []\n", encoding="utf-8")
    flags = [
        "--config",
        str(config),
        "--bitexts",
        *corpus_files,
        "--held_out",
        "5",
        "--eval_languages",
        "fr",
        "--mlm_languages",
        "fr",
        "--curriculum_languages",
        "fr",
        "--curriculum_increment",
        "0.5",
        "--vocab_size",
        "200",
        "--hidden_size",
        "32",
        "--num_hidden_layers",
        "2",
        "--num_attention_heads",
        "2",
        "--intermediate_size",
        "64",
        "--max_length",
        "48",
        "--output_dir",
        str(output_dir),
        "--per_device_train_batch_size",
        "8",
        "--max_steps",
        "8",
        "--learning_rate",
        "1e-3",
        "--save_steps",
        "4",
        "--logging_steps",
        "4",
        "--disable_tqdm",
        "true",
        "--report_to",
        "none",
        "--use_cpu",
        "true",
        *extra,
    ]
    return parse_args(recipe.ScriptArguments, TrainingArguments, recipe.StudentArguments, args=flags)


def test_recipe_trains_saves_and_reloads(recipe, corpus_files, tmp_path):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from bitext_hf.families.laser3 import StudentEncoder

    output_dir = tmp_path / "run"
    results = recipe.main(
        *tiny_args(recipe, corpus_files, output_dir, "--eval_strategy", "steps", "--eval_steps", "4")
    )
    assert results["global_step"] == 8
    # The corpus is N-way parallel: the English of the 5 held-out French pairs leaves the German and Spanish data too.
    assert results["n_train_pairs"] == {"fr": 15, "de": 15, "es": 15}
    saved = json.loads((output_dir / RESULTS_FILE).read_text())
    for key in ("teacher_zero_shot", "student_before", "student_after"):
        assert saved[key]["fr"]["n"] == 5 and 0.0 <= saved[key]["fr"]["xsim"] <= 100.0
    card = (output_dir / "README.md").read_text()
    assert "| fr | 5 |" in card and "{xsim_table}" not in card
    # The figures ship in the checkpoint and the card shows them (xsim of fr, the 5 held-out pairs' margins).
    for name in FIGURES:
        assert (output_dir / name).read_bytes().startswith(b"\x89PNG") and f"]({name})" in card, name
    assert f"fr→en {saved['student_after']['fr']['xsim']:.2f}%" in card and "5 held-out gold pairs" in card
    assert (output_dir / "checkpoint-8").is_dir() and (output_dir / "checkpoint-4").is_dir()
    # xsim on the held-out pairs every eval_steps, logged like any Trainer metric; the last one is the final model's.
    history = json.loads((output_dir / "checkpoint-8" / "trainer_state.json").read_text())["log_history"]
    evaluated = {entry["step"]: entry["eval_xsim_fr"] for entry in history if "eval_xsim_fr" in entry}
    assert sorted(evaluated) == [4, 8] and evaluated[8] == saved["student_after"]["fr"]["xsim"]
    assert any("loss_distil" in entry and "loss_self" in entry for entry in history)

    model = AutoModel.from_pretrained(output_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(output_dir)
    assert model.config.projection_dim == 512 and model.projection is not None
    sentences = ["Il pleut aujourd'hui.", "Wo ist der Bahnhof?", "Open the window, please."]
    expected = StudentEncoder(model, tokenizer).encode(sentences)
    remote = AutoModel.from_pretrained(output_dir, trust_remote_code=True).eval()
    np.testing.assert_allclose(StudentEncoder(remote, tokenizer).encode(sentences), expected, atol=1e-5)
    st_model = SentenceTransformer(str(output_dir), trust_remote_code=True, device="cpu")
    st_embeddings = st_model.encode(sentences, convert_to_numpy=True, normalize_embeddings=True)
    assert st_embeddings.shape == (3, 512)
    np.testing.assert_allclose(st_embeddings, expected, atol=1e-5)
    # The trained weights were saved, not the initial ones.
    checkpoint = (
        torch.load(output_dir / "checkpoint-8" / "pytorch_model.bin", weights_only=True)
        if (output_dir / "checkpoint-8" / "pytorch_model.bin").exists()
        else None
    )
    if checkpoint is None:
        from safetensors.torch import load_file

        checkpoint = load_file(output_dir / "checkpoint-8" / "model.safetensors")
    torch.testing.assert_close(checkpoint["projection.weight"], model.projection.weight)


@pytest.mark.slow
def test_recipe_resumes_from_its_last_checkpoint(recipe, corpus_files, tmp_path):
    import shutil

    output_dir = tmp_path / "run"
    recipe.main(*tiny_args(recipe, corpus_files, output_dir, "--eval_steps", "0"))
    full = json.loads((output_dir / RESULTS_FILE).read_text())["student_after"]
    shutil.rmtree(output_dir / "checkpoint-8")
    resumed = recipe.main(*tiny_args(recipe, corpus_files, output_dir, "--resume_from_checkpoint", "auto"))
    assert resumed["global_step"] == 8
    assert resumed["student_after"] == full, "the resumed run ends where the uninterrupted one did"


def test_recipe_bad_teacher_names_the_id(recipe, corpus_files, tmp_path):
    from bitext_hf.encoders import EncoderLoadError

    args = tiny_args(recipe, corpus_files, tmp_path / "run", "--teacher", "no-such-org/no-such-teacher")
    with pytest.raises(EncoderLoadError, match="no-such-org/no-such-teacher"):
        recipe.main(*args)


def test_recipe_bad_data(recipe, corpus_files, tmp_path, monkeypatch):
    from bitext_hf.errors import DataValidationError, UsageError
    from bitext_hf.families.laser3 import DistillationDataError

    (tmp_path / "wo.txt").write_text("Jàng\nBind\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("Read\n", encoding="utf-8")
    misaligned = f"wo={tmp_path / 'wo.txt'},{tmp_path / 'en.txt'}"
    with pytest.raises(DataValidationError, match="line-aligned"):
        recipe.main(*tiny_args(recipe, [*corpus_files, misaligned], tmp_path / "a"))
    with pytest.raises(DistillationDataError, match="'wo' has no data"):
        recipe.main(*tiny_args(recipe, corpus_files, tmp_path / "b", "--mlm_languages", "wo"))
    with pytest.raises(DataValidationError, match="eval language 'wo' has no data"):
        recipe.main(*tiny_args(recipe, corpus_files, tmp_path / "c", "--eval_languages", "wo"))
    with pytest.raises(UsageError, match="max_steps"):
        recipe.main(*tiny_args(recipe, corpus_files, tmp_path / "d", "--max_steps", "-1"))
    # Checkpointing is refused, before any work, for a student class that does not support it.
    monkeypatch.setattr(Laser3Student, "supports_gradient_checkpointing", False)
    with pytest.raises(UsageError, match="activation_checkpointing"):
        recipe.main(*tiny_args(recipe, corpus_files, tmp_path / "e", "--activation_checkpointing", "true"))
    with pytest.raises(UsageError, match="checkpoint folder"):
        recipe.main(*tiny_args(recipe, corpus_files, tmp_path / "f", "--resume_from_checkpoint", str(tmp_path)))
    assert not any((tmp_path / name / "model.safetensors").exists() for name in "abcdef")


@pytest.mark.parametrize(
    ("flag", "value"), [("--task_sampling", "temperature"), ("--mlm_break_mode", "none"), ("--dataset_alpha", "1.5")]
)
def test_recipe_rejects_bad_sampling_options(recipe, corpus_files, tmp_path, flag, value):
    from bitext_hf.errors import UsageError

    with pytest.raises(UsageError, match=flag.removeprefix("--")):
        tiny_args(recipe, corpus_files, tmp_path / "run", flag, value)


@pytest.mark.parametrize(
    ("extra", "sampling", "alpha", "mask_weight", "sentences_per_example"),
    [
        ((), "size_alpha", 0.91, 0.09, "several"),  # fairseq's laser_distillation, the default
        (("--task_sampling", "probability", "--mlm_break_mode", "eos"), "probability", 0.5, 1.0, "one"),
    ],
)
def test_recipe_passes_the_sampling_options_to_the_batches(
    recipe, corpus_files, tmp_path, tiny_tokenizer, extra, sampling, alpha, mask_weight, sentences_per_example
):
    from bitext_hf.families.laser3 import TeacherEmbeddingCache
    from bitext_hf.families.laser3.data import load_data
    from bitext_hf.families.laser3.recipe import build_batches

    class Teacher:
        def encode(self, sentences, batch_size=64, show_progress=False):
            return np.random.default_rng(len(sentences)).normal(size=(len(sentences), 8)).astype(np.float32)

    script_args, training_args, _ = tiny_args(recipe, corpus_files, tmp_path / "run", *extra)
    train, monolingual, english, _ = load_data(script_args)
    cache = TeacherEmbeddingCache(tmp_path / "cache", Teacher(), "random")
    batches = build_batches(tiny_tokenizer, cache, (train, monolingual, english), script_args, training_args)
    assert (batches.sampler.task_sampling, batches.sampler.alpha) == (sampling, alpha)
    assert batches.loss_weights["mask"] == mask_weight
    french = next(pairs for pairs in train if pairs.src_lang == "fr")
    examples = len(batches._mlm_ids["fr"])
    assert examples == len(french) if sentences_per_example == "one" else examples < len(french) / 2


def test_recipe_help_lists_every_argument(recipe, capsys):
    from transformers import TrainingArguments

    from bitext_hf.training import parse_args

    with pytest.raises(SystemExit) as exit_info:
        parse_args(recipe.ScriptArguments, TrainingArguments, recipe.StudentArguments, args=["--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    for flag in (
        "--curriculum_increment",
        "--curriculum_fraction",
        "--mask_weight",
        "--task_sampling",
        "--dataset_alpha",
        "--mlm_break_mode",
        "--teacher",
        "--vocab_size",
        "--max_steps",
        "--save_total_limit",
        "--push_to_hub",
    ):
        assert flag in help_text


def test_recipe_push_to_hub_uploads_the_export_once(recipe, corpus_files, tmp_path, monkeypatch):
    import huggingface_hub

    created, uploads = [], []

    def fake_create_repo(self, repo_id, *args, **kwargs):
        created.append(repo_id)
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    def fake_upload_folder(self, *args, folder_path=None, repo_id=None, ignore_patterns=None, **kwargs):
        files = [str(path.relative_to(folder_path)) for path in Path(folder_path).rglob("*") if path.is_file()]
        kept = huggingface_hub.utils.filter_repo_objects(files, ignore_patterns=ignore_patterns)
        uploads.append(
            {"repo_id": repo_id, "files": sorted(kept), "card": (Path(folder_path) / "README.md").read_text()}
        )

        class Commit:
            commit_url = "https://huggingface.co/someone/wolof-student/commit/fake"

        return Commit()

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", fake_create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder)
    args = tiny_args(
        recipe, corpus_files, tmp_path / "run", "--push_to_hub", "true", "--hub_model_id", "someone/wolof-student"
    )
    recipe.main(*args)
    assert created == ["someone/wolof-student"] and len(uploads) == 1, "one upload, at the end"
    files = uploads[0]["files"]
    assert {"model.safetensors", "config.json", "modeling_laser3.py", "tokenizer.json", "modules.json"} <= set(files)
    assert set(FIGURES) <= set(files), "the card's figures travel with it"
    assert not [name for name in files if name.startswith(("checkpoint-", "teacher_cache", "tokenizer/"))]
    assert "| fr | 5 |" in uploads[0]["card"], "the card with the xsim table, not the Trainer's"


def test_defaults_are_distillation_alone_with_the_paper_one_config_away(recipe):
    """experiments/README.md (LASER3): at small budgets MLM and the curriculum cost xsim against distillation of the
    same updates, so the recipe's own defaults train neither; the paper's configuration turns both on for Wolof."""
    from bitext_hf.training import load_yaml_config

    defaults = recipe.ScriptArguments()
    assert defaults.mlm_languages == [] and defaults.curriculum_languages == [] and defaults.monolingual == []
    paper = load_yaml_config(REPO / "recipes" / "configs" / "distill_wolof.yaml")
    assert paper["mlm_languages"] == paper["curriculum_languages"] == ["wol"] and paper["monolingual"]
    assert paper["curriculum_english_cut"] == "teacher"  # each side's own subwords, as the paper counts them


def test_monolingual_text_outside_the_mlm_languages_is_named(recipe, corpus_files, tmp_path, caplog):
    from bitext_hf.families.laser3.data import load_data

    text = tmp_path / "fr.txt"
    text.write_text("Une phrase.\nUne autre phrase.\n", encoding="utf-8")
    args = recipe.ScriptArguments(bitexts=corpus_files, monolingual=[f"fr={text}"], eval_bitexts=[])
    with caplog.at_level("WARNING", logger="distill_wolof"):
        _, monolingual, _, _ = load_data(args)
    assert monolingual == {"fr": ["Une phrase.", "Une autre phrase."]}
    assert "monolingual text of fr trains the vocabulary only" in caplog.text and "(none)" in caplog.text
