"""Every recipe's ``--push_to_hub`` goes through ``bitext_hf.hub.push_recipe_output``: which folder goes up, to which
repository, with which settings; and the exports and cards the four families push (MuSR's full model through
``save_for_hub``, ContrastiveAligned's card from its template). The Hub is a stand-in (``HfApi`` methods
intercepted), never the network."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainingArguments, XLMRobertaConfig

from bitext_hf.hub import push_recipe_output


class RecordingHub:
    """Records the HfApi calls and, at each ``upload_folder``, the repository and the files of the commit."""

    def __init__(self, monkeypatch):
        import huggingface_hub

        self.calls: list[tuple[str, dict]] = []
        self.commits: list[tuple[str, dict[str, bytes]]] = []
        for name in ("create_repo", "create_branch", "repo_info", "upload_folder"):
            monkeypatch.setattr(huggingface_hub.HfApi, name, self._method(name))

    def _method(self, name):
        def method(api, *args, **kwargs):
            self.calls.append((name, {"token": api.token, "args": args, **kwargs}))
            if name == "upload_folder":
                folder = Path(kwargs["folder_path"])
                files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
                self.commits.append((kwargs["repo_id"], files))
                return SimpleNamespace(commit_url=f"https://hub.example/{kwargs['repo_id']}/commit/1")
            if name == "repo_info":
                return SimpleNamespace(private=True)
            return "https://hub.example/repo"

        return method

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


@pytest.fixture
def hub(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", "hf_env_token")
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token-file"))
    return RecordingHub(monkeypatch)


def training_args(output_dir: Path, **hub_options) -> TrainingArguments:
    return TrainingArguments(output_dir=str(output_dir), report_to="none", use_cpu=True, **hub_options)


def minimal_export(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "README.md").write_text("# card\n")
    (folder / "checkpoint-3").mkdir(exist_ok=True)
    (folder / "checkpoint-3" / "optimizer.pt").write_bytes(b"optimizer")
    return folder


# -- the shared function ----------------------------------------------------------------------------------------------


def test_push_recipe_output_resolves_the_repository_and_forwards_the_hub_settings(hub, tmp_path):
    folder = minimal_export(tmp_path / "my-run")
    url = push_recipe_output(
        folder,
        training_args(
            folder,
            push_to_hub=True,
            hub_model_id="me/model",
            hub_private_repo=True,
            hub_token="hf_flag",
            hub_revision="v2",
        ),
        "ignored-default",
    )
    assert url == "https://hub.example/me/model/commit/1"
    assert hub.names() == ["create_repo", "repo_info", "create_branch", "upload_folder"]
    create, branch, upload = hub.calls[0][1], hub.calls[2][1], hub.calls[3][1]
    assert create["private"] is True and create["token"] == "hf_flag"
    assert branch["branch"] == "v2" and upload["revision"] == "v2"
    assert set(hub.commits[0][1]) == {"config.json", "model.safetensors", "README.md"}  # no checkpoint

    push_recipe_output(folder, training_args(folder, push_to_hub=True), "me/default")
    assert hub.commits[-1][0] == "me/default"
    push_recipe_output(folder, training_args(folder, push_to_hub=True))
    assert hub.commits[-1][0] == "my-run"  # the folder's name
    # No --hub_token: huggingface_hub's own default (HF_TOKEN, the login file); no --hub_revision: main.
    assert hub.calls[-1][1]["token"] is None and hub.calls[-1][1]["revision"] is None


def test_push_recipe_output_pushes_only_when_asked(hub, tmp_path):
    folder = minimal_export(tmp_path / "run")
    assert push_recipe_output(folder, training_args(folder)) is None  # --push_to_hub not given
    # Recipes switch the Trainer's flag off before training and pass the value they kept.
    assert push_recipe_output(folder, training_args(folder, push_to_hub=True), push=False) is None
    assert hub.calls == []
    push_recipe_output(folder, training_args(folder), push=True)
    assert [repo for repo, _ in hub.commits] == ["run"]


# -- each family's export path ----------------------------------------------------------------------------------------


def test_onealigner_save_outputs_pushes_the_output_folder(hub, tmp_path, tiny_tokenizer):
    from bitext_hf.families.onealigner import save_outputs
    from bitext_hf.families.onealigner.arguments import ScriptArguments
    from bitext_hf.modeling.onealigner import OneAlignerModel

    torch.manual_seed(0)
    encoder = {
        "model_type": "xlm-roberta",
        "hidden_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "vocab_size": len(tiny_tokenizer),
        "max_position_embeddings": 64,
        "pad_token_id": tiny_tokenizer.pad_token_id,
    }
    model = OneAlignerModel.from_encoder(XLMRobertaConfig(**encoder), 1, max_seq_length=32)
    script_args = ScriptArguments(train_pairs=["en-fr=pairs.tsv"], encoder="random")
    data = {"selected_pairs": ["en-fr"], "train_examples": 8, "eval_sets": {}}
    results = {"data": data, "final": {}, "global_step": 1}
    output_dir = tmp_path / "aligner"
    args = training_args(output_dir, push_to_hub=False, hub_model_id="me/aligner", hub_revision="exp")
    save_outputs(model, tiny_tokenizer, script_args, args, results, push=False)
    assert hub.commits == [] and (output_dir / "eval_results.json").is_file()
    save_outputs(model, tiny_tokenizer, script_args, args, results, push=True)
    ((repo, files),) = hub.commits
    assert repo == "me/aligner" and hub.calls[-1][1]["revision"] == "exp"
    assert {"config.json", "model.safetensors", "modules.json", "README.md", "eval_results.json"} <= set(files)


def test_laser3_save_outputs_pushes_the_student_folder(hub, tmp_path, tiny_tokenizer):
    from bitext_hf.families.laser3 import save_outputs
    from bitext_hf.families.laser3.arguments import ScriptArguments
    from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig

    torch.manual_seed(0)
    config = Laser3StudentConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        **{f"{name}_token_id": getattr(tiny_tokenizer, f"{name}_token_id") for name in ("pad", "bos", "eos", "mask")},
    )
    student = Laser3Student(config)
    script_args = ScriptArguments(bitexts=["wol=pairs.tsv"], monolingual=[], teacher="default")
    output_dir = tmp_path / "wolof-student"
    args = training_args(output_dir)  # the recipe kept --push_to_hub aside: the `push` argument
    save_outputs(student, tiny_tokenizer, script_args, args, {}, push=False, log_history=[])
    assert hub.calls == [] and (output_dir / "modeling_laser3.py").is_file()
    save_outputs(student, tiny_tokenizer, script_args, args, {}, push=True, log_history=[])
    ((repo, files),) = hub.commits
    assert repo == "wolof-student"
    assert {"config.json", "model.safetensors", "modeling_laser3.py", "modules.json", "README.md"} <= set(files)
    assert "xsim_results.json" not in files  # results stay local, as `bitext-hf push --model` selects


def _musr_model(tokenizer):
    from bitext_hf.modeling.musr import MuSRConfig, MuSREncoderDecoder

    torch.manual_seed(0)
    config = MuSRConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_encoder_layers=1,
        num_decoder_layers=1,
        num_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
    )
    return MuSREncoderDecoder(config)


def _musr_results() -> dict:
    final = {"xsim_fr-en": 12.5, "xsim_de-en": 25.0, "xsim_en": 18.75, "accuracy_en": 0.8}
    return {
        "data": {"languages": ["fr", "de"], "pivot": "fr", "train_examples": [64, 64]},
        "stage1": {"final": final},
        "stage2": {"final": {**final, "xsim_fr-en": 6.25}},
    }


def test_musr_save_outputs_exports_through_save_for_hub_and_pushes_the_full_model(hub, tmp_path, tiny_tokenizer):
    from transformers import AutoModel

    from bitext_hf.families.musr import save_outputs
    from bitext_hf.families.musr.arguments import ScriptArguments

    output_dir = tmp_path / "musr-run"
    (output_dir / "stage1").mkdir(parents=True)
    (output_dir / "stage1" / "config.json").write_text("{}")  # a stage's run: kept, and not pushed
    model = _musr_model(tiny_tokenizer)
    args = training_args(output_dir, push_to_hub=True, hub_model_id="me/musr")
    save_outputs(model, tiny_tokenizer, ScriptArguments(), args, _musr_results())

    top = {path.name for path in output_dir.iterdir() if path.is_file()}
    assert top == {
        "README.md",
        "config.json",
        "configuration_musr.py",
        "eval_results.json",
        "model.safetensors",
        "modeling_musr.py",
        "tokenizer.json",
        "tokenizer_config.json",
        "xsim_by_stage.png",
        # the full model is a sentence-transformers model too (max pooling, normalized: its encode)
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
    }
    assert "1_Pooling/config.json" in hub.commits[0][1] and "2_Normalize" in {p.name for p in output_dir.iterdir()}
    assert not list(tmp_path.glob(".*staging"))  # staged beside and moved in
    assert "![xsim by stage](xsim_by_stage.png)" in (output_dir / "README.md").read_text()
    assert "auto_map" in json.loads((output_dir / "config.json").read_text())  # remote code registered
    assert (output_dir / "stage1" / "config.json").read_text() == "{}"
    assert (output_dir / "sentence-transformers" / "modules.json").is_file()
    reloaded = AutoModel.from_pretrained(output_dir, trust_remote_code=True)
    assert reloaded.decoder is not None
    texts = ["The cat sleeps on the sofa.", "Le chat dort."]
    torch.testing.assert_close(reloaded.encode(texts), model.encode(texts, tiny_tokenizer))

    ((repo, files),) = hub.commits
    assert repo == "me/musr"
    assert top <= set(files) and not any(name.startswith(("stage1/", "sentence-transformers/")) for name in files)


def test_musr_save_outputs_without_push(hub, tmp_path, tiny_tokenizer):
    from bitext_hf.families.musr import save_outputs
    from bitext_hf.families.musr.arguments import ScriptArguments

    output_dir = tmp_path / "out"
    model = _musr_model(tiny_tokenizer)
    save_outputs(model, tiny_tokenizer, ScriptArguments(), training_args(output_dir), _musr_results())
    # The recipe kept --push_to_hub aside or not: `push` overrides the flag the arguments carry.
    args = training_args(output_dir, push_to_hub=True)
    save_outputs(model, tiny_tokenizer, ScriptArguments(), args, _musr_results(), push=False)
    assert hub.calls == [] and (output_dir / "README.md").is_file()


def _aligned_model(tokenizer, objective: str):
    from bitext_hf.modeling.contrastive_align import ContrastiveAlignConfig, ContrastiveAlignedEncoder

    torch.manual_seed(0)
    encoder = {
        "model_type": "bert",
        "hidden_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "vocab_size": len(tokenizer),
        "max_position_embeddings": 64,
        "pad_token_id": tokenizer.pad_token_id,
    }
    config = ContrastiveAlignConfig(encoder_config=encoder, objective=objective, languages=["de", "fr"])
    return ContrastiveAlignedEncoder(config)


def test_contrastive_save_outputs_renders_the_cards_and_pushes_the_encoder(hub, tmp_path, tiny_tokenizer):
    from bitext_hf.families.contrastive_align import save_outputs
    from bitext_hf.families.contrastive_align.arguments import ScriptArguments

    output_dir = tmp_path / "aligned"
    script_args = ScriptArguments(objective="linear", encoder="tiny-bert")
    results = {"data": {"languages": ["de", "fr"]}, "final": {"xsim": 0.123456, "de/xsim": 0.5}}
    model = _aligned_model(tiny_tokenizer, "linear")
    args = training_args(output_dir)
    save_outputs(model, tiny_tokenizer, script_args, args, results, push=True)

    ((repo, files),) = hub.commits
    assert repo == "aligned-encoder"  # the plain encoder, under the run's name
    assert {"config.json", "model.safetensors", "modules.json", "README.md"} <= set(files)
    card = files["README.md"].decode()
    assert "# ContrastiveAligned encoder: tiny-bert, aligned with the linear objective" in card
    assert "English with de, fr" in card
    assert "| xsim | 0.1235 |" in card and "de/xsim" not in card and "This export maps" not in card
    assert "cross-lingual-alignment" in card and "pipeline_tag: sentence-similarity" in card
    # The card shows its figure (xsim by held-out language), shipped beside it in every folder.
    assert "](xsim_heatmap.png)" in card and files["xsim_heatmap.png"].startswith(b"\x89PNG")
    assert (output_dir / "encoder-de" / "xsim_heatmap.png").is_file() and (output_dir / "xsim_heatmap.png").is_file()
    german = (output_dir / "encoder-de" / "README.md").read_text()
    assert "This export maps de sentences into the English space (W)." in german
    assert "| xsim | 0.1235 |" in german
    # The full model carries the encoder's card; the pushed copy names its repository in the load snippets.
    from bitext_hf.hub.card_facts import fill_repo_id

    assert fill_repo_id((output_dir / "README.md").read_text(), "aligned-encoder") == card
    assert 'SentenceTransformer("aligned-encoder"' in card

    args = training_args(output_dir, hub_model_id="me/aligned")
    save_outputs(_aligned_model(tiny_tokenizer, "strong"), tiny_tokenizer, script_args, args, results, push=False)
    assert len(hub.commits) == 1
    save_outputs(_aligned_model(tiny_tokenizer, "strong"), tiny_tokenizer, script_args, args, results, push=True)
    assert hub.commits[-1][0] == "me/aligned"


def test_contrastive_card_without_held_out_results():
    from bitext_hf.families.contrastive_align import model_card

    card = model_card("strong", "xlm-roberta-base", ["de"], {})
    assert "| (no held-out set) |" in card and "This export maps" not in card


def test_train_musr_recipe_pushes_its_export(hub, tmp_path, tiny_parallel_corpus_by_language, tiny_tokenizer):
    # --push_to_hub reaches the export through the recipe itself (the stages' Trainers never push).
    import importlib.util

    from bitext_hf.training import run_recipe

    spec = importlib.util.spec_from_file_location(
        "train_musr_push", Path(__file__).parents[1] / "recipes/train_musr.py"
    )
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    specs = []
    for language in ("fr", "de"):
        path = tmp_path / f"{language}.tsv"
        path.write_text("".join(f"{en}\t{xx}\n" for en, xx in tiny_parallel_corpus_by_language[language]))
        specs.append(f"{language}={path}")
    tiny_tokenizer.save_pretrained(tmp_path / "tokenizer")
    sizes = {"hidden_size": 16, "num_encoder_layers": 1, "num_decoder_layers": 1, "num_attention_heads": 2}
    sizes |= {"encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "max_seq_length": 32, "train_examples": 16}
    output_dir = tmp_path / "musr-run"
    arguments = ["--train_pairs", *specs, "--tokenizer", str(tmp_path / "tokenizer"), "--held_out", "0"]
    arguments += [item for name, value in sizes.items() for item in (f"--{name}", str(value))]
    arguments += ["--output_dir", str(output_dir), "--use_cpu", "true", "--max_steps", "1", "--save_strategy", "no"]
    arguments += [
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--push_to_hub",
        "true",
        "--hub_model_id",
        "me/musr",
    ]
    run_recipe(recipe.main, recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=arguments)
    ((repo, files),) = hub.commits
    assert repo == "me/musr" and {"config.json", "model.safetensors", "README.md", "eval_results.json"} <= set(files)
    assert not any(name.startswith(("stage1/", "stage2/", "sentence-transformers/")) for name in files)
