"""ContrastiveAlignedEncoder: the paper's objectives against hand computations, orthogonality, the regularizer,
save/load through the Auto classes and remote code without bitext_hf."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from remote_code_tf4 import transformers_4_dir
from transformers import AutoModel, BertConfig

from bitext_hf.modeling.contrastive_align import (
    ContrastiveAlignConfig,
    ContrastiveAlignConfigError,
    ContrastiveAlignedEncoder,
    ContrastiveAlignInputError,
    l2_alignment_loss,
    linear_mapping_loss,
    orthogonalize_,
    strong_contrastive_loss,
    weak_contrastive_loss,
)

TINY = {
    "model_type": "bert",
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "vocab_size": 100,
    "max_position_embeddings": 32,
}

# What save_pretrained ships as remote code: the two files auto_map names and the functional file the model imports.
SHIPPED = ["configuration_contrastive_align.py", "functional_contrastive_align.py", "modeling_contrastive_align.py"]


def contrastive_model(objective: str, **kwargs: object) -> ContrastiveAlignedEncoder:
    torch.manual_seed(0)
    config = ContrastiveAlignConfig(encoder_config=dict(TINY), objective=objective, languages=["de", "fr"], **kwargs)
    return ContrastiveAlignedEncoder(config)


def _batch() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return {
        "input_ids": torch.randint(5, 100, (3, 7), generator=generator),
        "attention_mask": torch.ones(3, 7, dtype=torch.long),
        "target_input_ids": torch.randint(5, 100, (3, 6), generator=generator),
        "target_attention_mask": torch.ones(3, 6, dtype=torch.long),
        "alignments": torch.tensor([[0, 1, 2], [1, 3, 1], [2, 2, 2], [0, 4, 5]]),
        "languages": torch.tensor([0, 1, 0]),
    }


# -- the equations on tiny tensors ---------------------------------------------------------------------------------


def test_l2_and_linear_losses_match_hand_computation() -> None:
    source = torch.tensor([[1.0, 2.0], [0.0, 1.0]])
    target = torch.tensor([[0.0, 2.0], [2.0, 1.0]])
    assert l2_alignment_loss(source, target).item() == pytest.approx((1.0 + 4.0) / 2)
    swap = torch.tensor([[0.0, 1.0], [1.0, 0.0]])  # t W swaps the coordinates: [2, 0] and [1, 2]
    loss = linear_mapping_loss(source[None], target[None], swap[None])
    assert loss.item() == pytest.approx(((1 + 4) + (1 + 1)) / 2)


def test_weak_contrastive_loss_matches_eq7() -> None:
    source = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    target = torch.tensor([[0.8, 0.6], [0.0, 1.0]])
    cos = [[0.8, 0.0], [0.96, 0.8]]  # cos(s_i, t_j), all vectors unit length
    total = 0.0
    for i in range(2):
        row = math.exp(cos[i][i] / 0.1) / sum(math.exp(cos[i][j] / 0.1) for j in range(2))
        column = math.exp(cos[i][i] / 0.1) / sum(math.exp(cos[j][i] / 0.1) for j in range(2))
        total += math.log(row) + math.log(column)
    assert weak_contrastive_loss(source, target, 0.1).item() == pytest.approx(-total / 4, rel=1e-5)


def test_strong_contrastive_loss_matches_eq8_and_sees_same_language_negatives() -> None:
    source = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    target = torch.tensor([[0.8, 0.6], [0.0, 1.0]])
    states = torch.cat([source, target])
    aligned = [2, 3, 0, 1]
    total = 0.0
    for h in range(4):
        numerator = math.exp(float(states[h] @ states[aligned[h]]) / 0.1)
        denominator = sum(math.exp(float(states[h] @ states[o]) / 0.1) for o in range(4) if o != h)
        total += math.log(numerator / denominator)
    assert strong_contrastive_loss(source, target, 0.1).item() == pytest.approx(-total / 4, rel=1e-5)
    # Moving s_2 onto s_1 changes only same-language similarities: the strong loss sees it, the weak one's
    # negatives (other language only) change through the cross terms alone.
    closer = torch.tensor([[1.0, 0.0], [0.99, 0.14]])
    weak_before, weak_after = (weak_contrastive_loss(s, target, 0.1) for s in (source, closer))
    strong_before, strong_after = (strong_contrastive_loss(s, target, 0.1) for s in (source, closer))
    assert strong_after - strong_before > weak_after - weak_before


def test_orthogonalization_step_and_fixed_point() -> None:
    weight = 2.0 * torch.eye(3)
    orthogonalize_(weight, 0.01)
    assert torch.allclose(weight, (1.01 * 2.0 - 0.01 * 8.0) * torch.eye(3))
    rotation = torch.linalg.qr(torch.randn(4, 4, generator=torch.Generator().manual_seed(0)))[0]
    kept = rotation.clone()
    orthogonalize_(kept, 0.01)
    assert torch.allclose(kept, rotation, atol=1e-6)


def _train_linear(orthogonalize: bool) -> torch.Tensor:
    model = contrastive_model("linear")
    model.train()
    optimizer = torch.optim.Adam([model.linear_maps.weight], lr=1e-4)  # the paper's learning rate
    batch = _batch()
    for _ in range(100):
        optimizer.zero_grad()
        model(**batch).loss.backward()
        optimizer.step()
        if orthogonalize:
            model.orthogonalize_()
    assert all(not parameter.requires_grad for parameter in model.encoder.parameters())  # frozen encoder
    return model.linear_maps.weight.detach().clone()


def _orthogonality_error(weight: torch.Tensor) -> float:
    return (weight @ weight.transpose(-1, -2) - torch.eye(weight.shape[-1])).abs().max().item()


def test_orthogonality_holds_after_training_updates() -> None:
    with_step, without_step = _train_linear(True), _train_linear(False)
    assert not torch.allclose(with_step, torch.eye(16).expand_as(with_step))  # it learned something
    assert _orthogonality_error(with_step) < min(0.01, 0.75 * _orthogonality_error(without_step))
    for _ in range(300):  # Eq. 2 alone converges to an orthogonal matrix
        orthogonalize_(without_step, 0.01)
    assert _orthogonality_error(without_step) < 1e-4


# -- the model ------------------------------------------------------------------------------------------------------


def test_default_config_and_validation() -> None:
    config = ContrastiveAlignConfig()
    assert (config.objective, config.layer, config.projection_dim, config.contrastive_temperature) == (
        "strong",
        2,
        128,
        0.1,
    )
    with pytest.raises(ContrastiveAlignConfigError, match="objective"):
        ContrastiveAlignConfig(objective="cosine")
    with pytest.raises(ContrastiveAlignConfigError, match="languages"):
        ContrastiveAlignedEncoder(ContrastiveAlignConfig(objective="linear"))


@pytest.mark.parametrize("objective", ["l2", "weak", "strong"])
def test_regularizer_is_zero_at_initialisation_then_grows(objective: str) -> None:
    model = contrastive_model(objective)
    model.train()
    output = model(**_batch())
    assert next(iter(output.keys())) == "loss"
    assert output.regularization_loss.item() == 0.0
    assert output.loss.item() == pytest.approx(output.alignment_loss.item())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    output.loss.backward()
    optimizer.step()
    after = model(**_batch())
    assert after.regularization_loss.item() > 0.0
    assert after.loss.item() == pytest.approx(after.alignment_loss.item() + after.regularization_loss.item())


def test_projector_shape_and_no_biases() -> None:
    model = contrastive_model("weak", projection_dim=8)
    shapes = [tuple(parameter.shape) for parameter in model.projector.parameters()]
    assert shapes == [(16, 16), (8, 16)]


def test_links_outside_a_sentence_are_refused() -> None:
    model = contrastive_model("strong")
    batch = _batch()
    batch["target_attention_mask"][1, 1:] = 0  # the second translation has one token
    with pytest.raises(ContrastiveAlignInputError, match="outside the target sentence"):
        model(**batch)
    batch = _batch()
    batch["alignments"] = torch.tensor([[5, 0, 0]])
    with pytest.raises(ContrastiveAlignInputError, match="example outside"):
        model(**batch)


def test_no_links_gives_zero_alignment_loss_with_a_graph() -> None:
    model = contrastive_model("strong")
    batch = _batch()
    batch["alignments"] = torch.zeros(0, 3, dtype=torch.long)
    output = model(**batch)
    assert output.alignment_loss.item() == 0.0
    output.loss.backward()


@pytest.mark.parametrize("objective", ["linear", "strong"])
def test_save_and_reload_through_automodel(objective: str, tmp_path: Path) -> None:
    model = contrastive_model(objective)
    if objective == "linear":  # a trained, non-identity map must survive the reload (not be re-initialised)
        with torch.no_grad():
            model.linear_maps.weight.add_(0.1)
    model.eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    assert sorted(path.name for path in tmp_path.glob("*.py")) == SHIPPED  # the remote code, every file it imports
    reloaded = AutoModel.from_pretrained(tmp_path).eval()
    assert type(reloaded) is ContrastiveAlignedEncoder
    for (name, value), (_, loaded) in zip(model.state_dict().items(), reloaded.state_dict().items()):
        assert torch.equal(value, loaded), name
    batch = _batch()
    with torch.no_grad():
        assert torch.allclose(
            model(batch["input_ids"]).last_hidden_state, reloaded(batch["input_ids"]).last_hidden_state
        )


def test_from_encoder_keeps_pretrained_weights_and_attention(tmp_path: Path) -> None:
    torch.manual_seed(3)
    encoder = AutoModel.from_config(BertConfig(**{k: v for k, v in TINY.items() if k != "model_type"}))
    encoder.save_pretrained(tmp_path / "encoder")
    model = ContrastiveAlignedEncoder.from_encoder(str(tmp_path / "encoder"), objective="weak").eval()
    assert torch.equal(model.encoder.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)
    # The live encoder keeps its attention implementation: a padded batch gives what the reloaded model gives.
    assert model.encoder.config._attn_implementation == encoder.config._attn_implementation
    model.save_pretrained(tmp_path / "aligned")
    reloaded = AutoModel.from_pretrained(tmp_path / "aligned").eval()
    batch = _batch()
    mask = batch["attention_mask"].clone()
    mask[0, 3:] = 0
    with torch.no_grad():
        before = model(batch["input_ids"], attention_mask=mask).last_hidden_state[mask.bool()]
        after = reloaded(batch["input_ids"], attention_mask=mask).last_hidden_state[mask.bool()]
    assert torch.allclose(before, after, atol=1e-6)
    with pytest.raises(ContrastiveAlignInputError, match="cannot load the encoder"):
        ContrastiveAlignedEncoder.from_encoder(str(tmp_path / "missing"))


def test_linear_forward_maps_non_english_rows() -> None:
    model = contrastive_model("linear").eval()
    with torch.no_grad():
        model.linear_maps.weight[1] = torch.flip(torch.eye(16), [0])
        ids = _batch()["input_ids"]
        plain = model(ids).last_hidden_state
        mapped = model(ids, languages=torch.tensor([-1, 1, 0])).last_hidden_state
    assert torch.equal(mapped[0], plain[0]) and torch.equal(mapped[2], plain[2])  # English / identity map
    assert torch.allclose(mapped[1], plain[1].flip(-1))


@pytest.mark.slow
@pytest.mark.parametrize("transformers_4", [False, True])
def test_remote_code_loads_without_bitext_hf(transformers_4: bool, tmp_path: Path) -> None:
    tf4 = transformers_4_dir() if transformers_4 else None
    model = contrastive_model("strong").eval()
    model.save_pretrained(tmp_path / "ckpt")
    assert sorted(path.name for path in (tmp_path / "ckpt").glob("*.py")) == SHIPPED
    ids = _batch()["input_ids"]
    with torch.no_grad():
        expected = model(ids).last_hidden_state[0, 0, :4].tolist()
    paths = ([str(tf4)] if transformers_4 else []) + list(
        dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    )
    code = textwrap.dedent(
        f"""
        import sys, json, importlib.util
        sys.path[:0] = {paths!r}
        assert importlib.util.find_spec("bitext_hf") is None
        import torch, transformers
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(tmp_path / "ckpt")!r}, trust_remote_code=True).eval()
        with torch.no_grad():
            states = model(torch.tensor({ids.tolist()!r})).last_hidden_state
        print(json.dumps([transformers.__version__, type(model).__name__, states[0, 0, :4].tolist()]))
        """
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    version, name, values = json.loads(result.stdout.strip().splitlines()[-1])
    assert version.startswith("4.57") if transformers_4 else int(version.split(".")[0]) >= 5
    assert name == "ContrastiveAlignedEncoder"
    assert values == pytest.approx(expected, abs=1e-5)


# -- the recipe -----------------------------------------------------------------------------------------------------


def _run_recipe(tmp_path: Path, *flags: str) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "recipes"))
    try:
        import align_contrastive
    finally:
        sys.path.pop(0)
    from transformers import TrainingArguments

    from bitext_hf.training import ModelArguments, parse_args

    config = Path(__file__).resolve().parents[1] / "recipes/configs/align_contrastive-smoke.yaml"
    args = [
        "--config",
        str(config),
        "--output_dir",
        str(tmp_path / "run"),
        "--max_pairs",
        "300",
        "--held_out",
        "40",
        "--max_steps",
        "6",
        "--save_steps",
        "6",
        "--logging_steps",
        "3",
        *flags,
    ]
    return align_contrastive.main(
        *parse_args(align_contrastive.ScriptArguments, TrainingArguments, ModelArguments, args=args)
    )


@pytest.mark.slow
def test_recipe_smoke_leaves_loadable_checkpoint_and_encoder(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    results = _run_recipe(tmp_path)
    run = tmp_path / "run"
    assert results["global_step"] == 6 and set(results["initial"]) == set(results["final"])
    assert {"word_accuracy", "xsim", "sentence_accuracy", "de/xsim"} <= set(results["final"])
    assert json.loads((run / "eval_results.json").read_text())["global_step"] == 6
    model = AutoModel.from_pretrained(run)
    assert type(model) is ContrastiveAlignedEncoder and model.config.languages == ["de", "fr"]
    assert list((run / "alignments").glob("alignments-*.json"))  # the word-alignment cache
    # The card shows the held-out xsim by language and the training curve, in the model's folder and the encoder's.
    for folder in (run, run / "encoder"):
        card = (folder / "README.md").read_text()
        for figure in ("xsim_heatmap.png", "training_curve.png"):
            assert f"]({figure})" in card and (folder / figure).read_bytes().startswith(b"\x89PNG"), (folder, figure)
    # A 300-word sentence from the top-level folder is truncated, in Python and through the command line's
    # encoder (it once failed with an index error past the recipe's 35-row position table).
    long_sentence = " ".join(["Datei öffnen"] * 150)
    vector = model.encode([long_sentence])
    assert vector.shape == (1, model.encode(["x"]).shape[1]) and torch.isfinite(vector).all()
    from bitext_hf.encoders import load_encoder

    assert np.isfinite(load_encoder(str(run)).encode([long_sentence])).all()
    encoder = AutoModel.from_pretrained(run / "encoder")  # plain XLM-R, no projector
    assert type(encoder).__name__ == "XLMRobertaModel"
    embeddings = SentenceTransformer(str(run / "encoder"), device="cpu").encode(["Open file", "Datei öffnen"])
    assert embeddings.shape == (2, 32)


@pytest.mark.slow
def test_recipe_linear_exports_one_encoder_per_language(tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    _run_recipe(tmp_path, "--objective", "linear", "--held_out", "0", "--learning_rate", "1e-3")
    run = tmp_path / "run"
    model = AutoModel.from_pretrained(run)
    weight = model.linear_map("de")
    assert not torch.allclose(weight, torch.eye(32))  # trained
    assert (weight @ weight.T - torch.eye(32)).abs().max().item() < 0.05
    english = SentenceTransformer(str(run / "encoder"), device="cpu")
    german = SentenceTransformer(str(run / "encoder-de"), device="cpu")
    plain, mapped = english.encode(["Datei öffnen"]), german.encode(["Datei öffnen"])
    expected = torch.nn.functional.normalize(torch.from_numpy(plain) @ weight, dim=-1)
    assert torch.allclose(torch.from_numpy(mapped), expected, atol=1e-5)


def test_orthogonalize_callback_steps_the_unwrapped_model() -> None:
    from bitext_hf.families.contrastive_align import OrthogonalizeCallback

    model = contrastive_model("linear")
    with torch.no_grad():
        model.linear_maps.weight.mul_(1.1)

    class Wrapped(torch.nn.Module):  # as DDP holds the model: under .module
        def __init__(self) -> None:
            super().__init__()
            self.module = model

    OrthogonalizeCallback().on_step_end(None, None, None, model=Wrapped())
    expected = (1.01 * 1.1 - 0.01 * 1.1**3) * torch.eye(16)
    assert torch.allclose(model.linear_maps.weight, expected.expand_as(model.linear_maps.weight))


def test_recipe_refuses_peft_with_linear(tmp_path: Path) -> None:
    from bitext_hf.errors import UsageError

    with pytest.raises(UsageError, match="frozen"):
        _run_recipe(tmp_path, "--objective", "linear", "--use_peft")


def test_recipe_missing_eflomal_is_a_usage_error_naming_the_fallback(tmp_path: Path) -> None:
    from bitext_hf.errors import UsageError
    from bitext_hf.families.contrastive_align import eflomal_available

    if eflomal_available():
        pytest.skip("eflomal is installed")
    with pytest.raises(UsageError, match="--aligner similarity"):
        _run_recipe(tmp_path, "--aligner", "eflomal")
    assert not (tmp_path / "run").exists()  # refused before anything was read or written


def test_encode_texts_with_the_linear_map_of_a_language(tmp_path: Path) -> None:
    from test_word_alignment import tiny_tokenizer

    model = contrastive_model("linear")
    with torch.no_grad():
        model.linear_maps.weight[0] = torch.linalg.qr(torch.randn(3, 16, 16))[0]
    tokenizer = tiny_tokenizer()
    texts = ["le chat dort", "un chien court ."]
    plain = model.encode(texts, tokenizer, normalize=False)
    mapped = model.encode(texts, language="de")  # the tokenizer given before is kept
    expected = torch.nn.functional.normalize(plain @ model.linear_map("de").detach(), dim=-1)
    assert torch.allclose(mapped, expected, atol=1e-5)
    model.save_pretrained(tmp_path)  # the tokenizer encode used goes beside the weights
    reloaded = AutoModel.from_pretrained(tmp_path)
    assert torch.allclose(reloaded.encode(texts, language="de"), mapped, atol=1e-5)


@pytest.mark.slow
def test_recipe_with_lora_saves_the_adapter_and_merges_it(tmp_path: Path) -> None:
    results = _run_recipe(tmp_path, "--use_peft", "--lora_r", "4", "--held_out", "0", "--max_steps", "3")
    run = tmp_path / "run"
    assert results["global_step"] == 3
    assert (run / "adapter" / "adapter_config.json").is_file()  # the LoRA adapter on its own
    model = AutoModel.from_pretrained(run)  # merged: a plain ContrastiveAlignedEncoder, no peft layers
    assert type(model) is ContrastiveAlignedEncoder
    assert model.config.regularization_weight == 0.0  # LoRA replaces the regularizer unless asked for
    assert not any("lora" in name for name in model.state_dict())


def test_dropout_of_the_random_encoder_is_checked_and_applied(tiny_tokenizer):
    from bitext_hf.errors import UsageError
    from bitext_hf.families.contrastive_align.recipe import ScriptArguments, build_model

    with pytest.raises(UsageError, match=r"--dropout must be in \[0, 1\), got 1.5"):
        ScriptArguments(train_pairs=["de=gettext"], dropout=1.5)
    sizes = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
    script_args = ScriptArguments(train_pairs=["de=gettext"], encoder="random", objective="l2", dropout=0.0, **sizes)
    config = build_model(script_args, tiny_tokenizer, ["de"], lora=False, seed=0).encoder.config
    assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == 0.0


def test_each_link_weighs_the_same_in_one_process():
    """Outside a distributed job the alignment term is the model's own mean (a share of 1)."""
    from bitext_hf.training.distributed import global_share

    assert global_share(7, torch.device("cpu")) == 1.0
