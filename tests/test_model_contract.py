"""The PreTrainedModel contract, one table for every model family.

Each family is one `Family` entry in `FAMILIES` (a tiny random model, its inputs, how to read an embedding, a
training batch, its LoRA targets, the options of its sentence-transformers export); every test below runs for
every entry. What a user of a published checkpoint relies on, without bitext_hf:

* a plain `save_pretrained` ships the remote code and the tokenizer, and reloads with identical weights;
* `dtype=torch.bfloat16` loading; `gradient_checkpointing_enable()` then a training step (same loss and gradients,
  the layers really recomputed); `resize_token_embeddings` with the output head and the config following;
* `get_peft_model(model, LoraConfig(...))`: a training step moves only the adapter, and the saved adapter reloads
  onto the saved base with identical outputs;
* `AutoModel.from_pretrained(hub_id, trust_remote_code=True)` from a local hub cache with HF_HUB_OFFLINE=1 in a
  process without bitext_hf, and the same checkpoint under transformers 4.57 (see `remote_code_tf4`);
* text in, embeddings out: `model.encode(texts)` after `from_pretrained` (tokenizer from the checkpoint) and the
  sentence-transformers export give the same L2-normalized vectors.

All four families are in the table; a new family joins by appending its entry to `FAMILIES`. What a family does
not do yet is listed in its `known_failures` (strict expected failures, so a fix shows up as a failing XPASS until
the entry is removed).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from remote_code_tf4 import run_without_bitext_hf
from transformers import AutoModel, PreTrainedModel, XLMRobertaConfig
from transformers.modeling_layers import GradientCheckpointingLayer

import bitext_hf.modeling  # noqa: F401  (registers the Auto classes)
from bitext_hf.modeling.contrastive_align import ContrastiveAlignedEncoder
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig
from bitext_hf.modeling.musr import MuSRConfig, MuSREncoderDecoder
from bitext_hf.modeling.onealigner import OneAlignerModel

SENTENCES = ["The cat sleeps on the sofa.", "Le chat dort.", "¿Dónde está la estación?", "Heute regnet es."]
TARGETS = ["Le chat dort sur le canapé.", "The cat sleeps.", "Where is the station?", "It is raining today."]


@dataclass(frozen=True)
class Family:
    """One model family in the contract table.

    Attributes:
        name: test id.
        model_class: the family's model class (what the Auto classes must give back).
        build: tokenizer -> a tiny random model (hidden 32, 2 layers, no dropout), in eval mode.
        inputs: tokenizer -> forward keyword arguments for an embedding of `SENTENCES`.
        embed: (forward output, its inputs) -> the sentence embeddings `(n, d)` that `model.encode` normalizes.
        training_inputs: tokenizer -> forward keyword arguments whose output has a `loss`.
        lora_targets: module names for `LoraConfig(target_modules=...)`.
        export_options: model -> the `sentence_transformers` options of the family's `save_for_hub` call.
        build_short_table: tokenizer -> the same tiny model with a position table of about 32 rows, which numbers fewer
            tokens than its config would otherwise let `encode` take (what a recipe writes for short sentences).
        known_failures: test function name -> why the family fails it today; such a test is an expected failure
            (strict: once the family passes it, the entry must go).
    """

    name: str
    model_class: type[PreTrainedModel]
    build: Callable[[Any], PreTrainedModel]
    inputs: Callable[[Any], dict[str, torch.Tensor]]
    embed: Callable[[Any, dict[str, torch.Tensor]], torch.Tensor]
    training_inputs: Callable[[Any], dict[str, Any]]
    lora_targets: tuple[str, ...]
    export_options: Callable[[PreTrainedModel], dict[str, Any]]
    build_short_table: Callable[[Any], PreTrainedModel]
    known_failures: Mapping[str, str] = field(default_factory=dict)


def _tokenize(tokenizer: Any, sentences: list[str]) -> dict[str, torch.Tensor]:
    batch = tokenizer(sentences, padding=True, truncation=True, return_tensors="pt")
    return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}


# -- Laser3Student ---------------------------------------------------------------------------------------------


def _laser3(tokenizer: Any, positions: int = 64) -> Laser3Student:
    torch.manual_seed(0)
    config = Laser3StudentConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=positions,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        projection_dim=16,
    )
    return Laser3Student(config).eval()


def _laser3_training(tokenizer: Any) -> dict[str, Any]:
    batch = _tokenize(tokenizer, SENTENCES)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    labels[:, ::2] = -100  # predict every other token (MLM task)
    teacher = torch.randn(len(SENTENCES), 16, generator=torch.Generator().manual_seed(1))
    return {**batch, "labels": labels, "teacher_embeddings": teacher}


LASER3 = Family(
    name="laser3",
    model_class=Laser3Student,
    build=_laser3,
    inputs=lambda tokenizer: _tokenize(tokenizer, SENTENCES),
    embed=lambda output, inputs: output.sentence_embedding,
    training_inputs=_laser3_training,
    lora_targets=("query", "value"),
    # what bitext_hf.families.laser3's export passes: the model's pooling and its projection as Dense
    export_options=lambda model: {"pooling": "max", "dense": model.projection, "verify": True},
    build_short_table=lambda tokenizer: _laser3(tokenizer, positions=32),
)


# -- OneAlignerModel -------------------------------------------------------------------------------------------


def _onealigner(tokenizer: Any, positions: int = 512) -> OneAlignerModel:
    torch.manual_seed(0)
    encoder = XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        max_position_embeddings=positions,
    )
    # keeps 2 layers; the config allows max_seq_length up to max_position_embeddings
    return OneAlignerModel.from_encoder(encoder, layer=2, max_seq_length=min(100, positions)).eval()


def _onealigner_training(tokenizer: Any) -> dict[str, Any]:
    targets = _tokenize(tokenizer, TARGETS)
    return {
        **_tokenize(tokenizer, SENTENCES),
        "target_input_ids": targets["input_ids"],
        "target_attention_mask": targets["attention_mask"],
        "return_loss": True,
    }


ONEALIGNER = Family(
    name="onealigner",
    model_class=OneAlignerModel,
    build=_onealigner,
    inputs=lambda tokenizer: _tokenize(tokenizer, SENTENCES),
    embed=lambda output, inputs: output.sentence_embedding,
    training_inputs=_onealigner_training,
    lora_targets=("query", "value"),
    # what recipes/train_onealigner.py passes
    export_options=lambda model: {"pooling": "mean", "normalize": True, "verify": True},
    build_short_table=lambda tokenizer: _onealigner(tokenizer, positions=32),
)

# -- MuSREncoderDecoder ---------------------------------------------------------------------------------------


def _musr(tokenizer: Any, positions: int = 64) -> MuSREncoderDecoder:
    torch.manual_seed(0)
    config = MuSRConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_encoder_layers=2,
        num_decoder_layers=1,
        num_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=128,
        dropout=0.0,
        attention_dropout=0.0,
        max_position_embeddings=positions,
        label_smoothing=0.0,
    )
    return MuSREncoderDecoder(config).eval()


def _musr_training(tokenizer: Any) -> dict[str, Any]:
    targets = _tokenize(tokenizer, TARGETS)
    labels = targets["input_ids"].masked_fill(targets["attention_mask"] == 0, -100)
    return {**_tokenize(tokenizer, SENTENCES), "labels": labels}


MUSR = Family(
    name="musr",
    model_class=MuSREncoderDecoder,
    build=_musr,
    inputs=lambda tokenizer: _tokenize(tokenizer, SENTENCES),
    embed=lambda output, inputs: output.sentence_embedding,
    training_inputs=_musr_training,
    lora_targets=("query", "value"),
    # what bitext_hf.families.musr's export passes
    export_options=lambda model: {"pooling": "max", "normalize": True, "verify": True},
    build_short_table=lambda tokenizer: _musr(tokenizer, positions=32),
)


# -- ContrastiveAlignedEncoder -----------------------------------------------------------------------------------


def _contrastive(tokenizer: Any, positions: int = 512) -> ContrastiveAlignedEncoder:
    torch.manual_seed(0)
    encoder = XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        max_position_embeddings=positions,
    )
    return ContrastiveAlignedEncoder.from_encoder(encoder, objective="strong", projection_dim=16).eval()


def _contrastive_training(tokenizer: Any) -> dict[str, Any]:
    targets = _tokenize(tokenizer, TARGETS)
    links = [[example, position, position] for example in range(len(SENTENCES)) for position in (1, 2)]
    return {
        **_tokenize(tokenizer, SENTENCES),
        "target_input_ids": targets["input_ids"],
        "target_attention_mask": targets["attention_mask"],
        "alignments": torch.tensor(links),
    }


def _mean_pool(output: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    mask = inputs["attention_mask"].unsqueeze(-1).to(output.last_hidden_state.dtype)
    return (output.last_hidden_state * mask).sum(1) / mask.sum(1)


CONTRASTIVE = Family(
    name="contrastive_align",
    model_class=ContrastiveAlignedEncoder,
    build=_contrastive,
    inputs=lambda tokenizer: _tokenize(tokenizer, SENTENCES),
    embed=lambda output, inputs: _mean_pool(output, inputs),
    training_inputs=_contrastive_training,
    lora_targets=("query", "value"),
    export_options=lambda model: {"pooling": "mean", "normalize": True, "verify": True},
    # recipes/align_contrastive.py's table for --max_seq_length 32: 32 + 2 + pad_token_id rows, max_seq_length 96
    build_short_table=lambda tokenizer: _contrastive(tokenizer, positions=35),
)

FAMILIES: list[Family] = [LASER3, ONEALIGNER, MUSR, CONTRASTIVE]


def every_family(test: Callable) -> Callable:
    """Run `test` once per family; a family's known failure of it is a strict expected failure."""
    params = [
        pytest.param(
            family,
            id=family.name,
            marks=[pytest.mark.xfail(reason=family.known_failures[test.__name__], strict=True)]
            if test.__name__ in family.known_failures
            else [],
        )
        for family in FAMILIES
    ]
    return pytest.mark.parametrize("family", params)(test)


# -- helpers ---------------------------------------------------------------------------------------------------


def _embedding(family: Family, model: PreTrainedModel, tokenizer: Any) -> torch.Tensor:
    inputs = {key: value.to(model.device) for key, value in family.inputs(tokenizer).items()}
    with torch.no_grad():
        return family.embed(model(**inputs, return_dict=True), inputs).float()


def _saved(family: Family, tokenizer: Any, folder: Path) -> PreTrainedModel:
    """Build the family's tiny model and save it and the tokenizer with a plain `save_pretrained`."""
    model = family.build(tokenizer)
    model.save_pretrained(folder, tokenizer=tokenizer)
    return model


def _training_step(model: torch.nn.Module, inputs: dict[str, Any], lr: float = 1e-2) -> float:
    model.train()
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=lr)
    loss = model(**inputs).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    model.eval()
    return loss.item()


def _hub_cache(folder: Path, cache: Path, repo_id: str) -> None:
    """A huggingface_hub cache holding `folder` as the main revision of `repo_id` (blobs omitted: plain files)."""
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for path in folder.iterdir():
        if path.is_file():
            (snapshot / path.name).write_bytes(path.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)


# -- the contract ----------------------------------------------------------------------------------------------


@every_family
def test_plain_save_pretrained_ships_remote_code_and_tokenizer(family, tiny_tokenizer, tmp_path):
    model = _saved(family, tiny_tokenizer, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert set(config["auto_map"]) == {"AutoConfig", "AutoModel"}
    for reference in config["auto_map"].values():
        assert (tmp_path / f"{reference.split('.')[0]}.py").is_file()
    assert (tmp_path / "tokenizer.json").is_file() and (tmp_path / "tokenizer_config.json").is_file()
    assert (tmp_path / "model.safetensors").is_file()
    # transformers 4.x has no TokenizersBackend: the saved class name is one that both majors read
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert model.name_or_path == ""  # nothing to find a tokenizer from: it was written because it was given


@every_family
def test_save_and_load_give_identical_weights(family, tiny_tokenizer, tmp_path):
    model = _saved(family, tiny_tokenizer, tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert type(loaded) is family.model_class
    expected, actual = model.state_dict(), loaded.state_dict()
    assert expected.keys() == actual.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, actual[name]), name
    assert torch.equal(_embedding(family, loaded, tiny_tokenizer), _embedding(family, model, tiny_tokenizer))


@every_family
def test_bfloat16_loading(family, tiny_tokenizer, tmp_path):
    model = _saved(family, tiny_tokenizer, tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    assert {parameter.dtype for parameter in loaded.parameters()} == {torch.bfloat16}
    actual, expected = _embedding(family, loaded, tiny_tokenizer), _embedding(family, model, tiny_tokenizer)
    assert torch.isfinite(actual).all()
    assert F.cosine_similarity(actual, expected).min() > 0.98


@every_family
def test_gradient_checkpointing_training_step(family, tiny_tokenizer):
    plain = family.build(tiny_tokenizer).train()
    checkpointed = copy.deepcopy(plain)
    checkpointed.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert checkpointed.is_gradient_checkpointing
    inputs = family.training_inputs(tiny_tokenizer)

    def forward_calls(model: torch.nn.Module) -> tuple[list[int], dict[str, torch.Tensor], float]:
        calls: list[int] = []
        layer = next(module for module in model.modules() if isinstance(module, GradientCheckpointingLayer))
        # A child of the layer: transformers 5 checkpoints the layer's forward, so the layer's own hooks run once.
        handle = next(layer.children()).register_forward_hook(lambda *args: calls.append(1))
        loss = model(**inputs).loss
        loss.backward()
        handle.remove()
        grads = {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}
        return calls, grads, loss.item()

    plain_calls, plain_grads, plain_loss = forward_calls(plain)
    calls, grads, loss = forward_calls(checkpointed)
    assert plain_calls and len(calls) == 2 * len(plain_calls)  # the layer ran again in the backward pass
    assert loss == pytest.approx(plain_loss, rel=1e-6)
    assert grads.keys() == plain_grads.keys() and grads
    for name, grad in grads.items():
        torch.testing.assert_close(grad, plain_grads[name], atol=1e-6, rtol=1e-5)


@every_family
def test_resize_token_embeddings_keeps_head_and_config_consistent(family, tiny_tokenizer, tmp_path):
    model = family.build(tiny_tokenizer)
    old_size = model.get_input_embeddings().weight.shape[0]
    new_size = old_size + 8
    model.resize_token_embeddings(new_size)
    assert model.get_input_embeddings().weight.shape[0] == new_size
    head = model.get_output_embeddings()
    if head is not None:
        assert head.weight.shape[0] == new_size
        assert head.bias is None or head.bias.shape[0] == new_size
    inputs = family.training_inputs(tiny_tokenizer)
    inputs["input_ids"][0, 1] = new_size - 1  # a new token
    assert torch.isfinite(model(**inputs).loss)
    # The config follows, so that the resized model reloads (and its outputs with it).
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert loaded.get_input_embeddings().weight.shape[0] == new_size
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).loss, model.eval()(**inputs).loss)


@every_family
def test_lora_training_and_adapter_reload(family, tiny_tokenizer, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    base = _saved(family, tiny_tokenizer, tmp_path / "base")
    base_embedding = _embedding(family, base, tiny_tokenizer)
    frozen = {name: tensor.clone() for name, tensor in base.state_dict().items()}
    lora = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=list(family.lora_targets))
    )
    trainable = {name for name, parameter in lora.named_parameters() if parameter.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    before = {name: parameter.detach().clone() for name, parameter in lora.named_parameters() if "lora_B" in name}
    _training_step(lora, family.training_inputs(tiny_tokenizer), lr=0.5)
    assert any(
        not torch.equal(parameter, before[name]) for name, parameter in lora.named_parameters() if name in before
    )
    adapted = _embedding(family, lora, tiny_tokenizer)
    assert not torch.allclose(adapted, base_embedding)  # the adapter changes the model
    lora.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    for name, tensor in lora.get_base_model().state_dict().items():  # the base weights did not move
        if "lora_" not in name and "base_layer" not in name:
            assert torch.equal(tensor, frozen[name]), name

    reloaded = PeftModel.from_pretrained(AutoModel.from_pretrained(tmp_path / "base"), tmp_path / "adapter").eval()
    torch.testing.assert_close(_embedding(family, reloaded, tiny_tokenizer), adapted, atol=1e-6, rtol=1e-6)


@every_family
def test_encode_text_after_from_pretrained(family, tiny_tokenizer, tmp_path):
    model = _saved(family, tiny_tokenizer, tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path, trust_remote_code=True)
    embeddings = loaded.encode(SENTENCES)
    assert embeddings.dtype == torch.float32 and embeddings.shape[0] == len(SENTENCES)
    torch.testing.assert_close(embeddings.norm(dim=-1), torch.ones(len(SENTENCES)))
    expected = F.normalize(_embedding(family, model, tiny_tokenizer), dim=-1)
    torch.testing.assert_close(embeddings, expected, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(loaded.encode(SENTENCES[::-1]), expected.flip(0), atol=1e-5, rtol=1e-4)


@every_family
def test_encode_refuses_bad_input_the_same_way_in_every_family(family, tiny_tokenizer):
    """The text path is one copied source: the same errors, the same messages, the same empty result."""
    model = family.build(tiny_tokenizer)
    for not_a_list in ("one string", ["a sentence", 7]):
        with pytest.raises(TypeError, match=r"^encode expects a list of strings$"):
            model.encode(not_a_list, tiny_tokenizer)
    with pytest.raises(ValueError, match=r"^no tokenizer: pass encode\(\.\.\., tokenizer=\.\.\.\)") as raised:
        model.encode(SENTENCES)  # built, not loaded: no folder to find a tokenizer in
    # the family's own error class (a ValueError), from its own shipped file
    family_prefix = next(cls.__name__ for cls in type(model).__mro__ if cls.__name__.endswith("PreTrainedModel"))
    assert type(raised.value).__name__ == family_prefix.replace("PreTrainedModel", "InputError")
    assert type(raised.value).__module__.rsplit(".", 1)[0] == type(model).__module__.rsplit(".", 1)[0]
    width = model.encode(SENTENCES, tiny_tokenizer).shape[1]
    assert width == model.config.embedding_dim
    assert model.encode([], tiny_tokenizer).shape == (0, width)


@every_family
def test_sentence_transformers_export_gives_the_encode_vectors(family, tiny_tokenizer, tmp_path):
    from sentence_transformers import SentenceTransformer

    from bitext_hf.hub import save_for_hub

    model = family.build(tiny_tokenizer)
    options = family.export_options(model)
    save_for_hub(model, tiny_tokenizer, tmp_path / "export", model_card="# tiny\n", sentence_transformers=options)
    tokenizer_config = json.loads((tmp_path / "export" / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"  # readable by transformers 4.57 too
    encoder = SentenceTransformer(str(tmp_path / "export"), trust_remote_code=True, device="cpu")
    actual = torch.as_tensor(encoder.encode(SENTENCES, convert_to_numpy=True))
    torch.testing.assert_close(actual.norm(dim=-1), torch.ones(len(SENTENCES)), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(actual, model.encode(SENTENCES, tiny_tokenizer), atol=1e-5, rtol=1e-4)


_LOAD_AND_ENCODE = """
import json
import torch
from transformers import AutoModel
model = AutoModel.from_pretrained({source!r}, trust_remote_code=True).eval()
assert "bitext_hf" not in type(model).__module__, type(model).__module__
assert type(model).__name__ == {class_name!r}, type(model).__name__
print(json.dumps(model.encode({sentences!r}).tolist()))
"""


@pytest.mark.slow
@every_family
def test_remote_code_from_an_offline_hub_cache_without_bitext_hf(family, tiny_tokenizer, tmp_path):
    model = _saved(family, tiny_tokenizer, tmp_path / "model")
    repo_id = f"bitext-hf/tiny-{family.name}"
    _hub_cache(tmp_path / "model", tmp_path / "hub", repo_id)
    code = _LOAD_AND_ENCODE.format(source=repo_id, class_name=family.model_class.__name__, sentences=SENTENCES)
    result = run_without_bitext_hf(code, cwd=tmp_path, env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    torch.testing.assert_close(torch.tensor(result), model.encode(SENTENCES, tiny_tokenizer), atol=1e-5, rtol=1e-4)


@pytest.mark.slow
@every_family
def test_remote_code_under_transformers_4_57(family, tiny_tokenizer, tmp_path):
    model = _saved(family, tiny_tokenizer, tmp_path / "model")
    code = _LOAD_AND_ENCODE.format(
        source=str(tmp_path / "model"), class_name=family.model_class.__name__, sentences=SENTENCES
    )
    result = run_without_bitext_hf(code, cwd=tmp_path, transformers_4=True)
    torch.testing.assert_close(torch.tensor(result), model.encode(SENTENCES, tiny_tokenizer), atol=1e-5, rtol=1e-4)


def _one_token_words(tokenizer: Any, texts: list[str]) -> list[str]:
    """Words of `texts` that the tokenizer keeps as one token each, so that cutting a text after n words cuts it
    after n tokens."""
    words = dict.fromkeys(" ".join(texts).split())
    return [word for word in words if len(tokenizer(word, add_special_tokens=False)["input_ids"]) == 1]


@every_family
@pytest.mark.parametrize("table", ["default", "short"])
def test_encode_truncates_an_overlong_sentence_to_its_maximum_length(
    family, table, tiny_tokenizer, tiny_parallel_corpus, tmp_path
):
    model = family.build(tiny_tokenizer) if table == "default" else family.build_short_table(tiny_tokenizer)
    model.save_pretrained(tmp_path, tokenizer=tiny_tokenizer)
    loaded = AutoModel.from_pretrained(tmp_path)  # the tokenizer comes from the folder, as for a user
    words = _one_token_words(tiny_tokenizer, [text for pair in tiny_parallel_corpus for text in pair])
    assert len(words) >= 10
    rows = max(
        module.num_embeddings for name, module in loaded.named_modules() if name.endswith("position_embeddings")
    )
    overlong = " ".join(words[index % len(words)] for index in range(max(300, rows + 1)))  # 300 words at least
    assert len(tiny_tokenizer(overlong)["input_ids"]) > rows  # longer than the position table
    embedding = loaded.encode([overlong])
    assert embedding.shape[0] == 1 and torch.isfinite(embedding).all()
    # What truncation keeps: <s>, the first max_tokens - 2 words (one token each), </s>.
    kept = " ".join(overlong.split()[: loaded.max_tokens - 2])
    assert len(tiny_tokenizer(kept)["input_ids"]) == loaded.max_tokens <= rows
    torch.testing.assert_close(embedding, loaded.encode([kept]), atol=1e-6, rtol=1e-5)
    # and through load_encoder, as `bitext-hf eval --model` and `mine --model` load a folder
    from bitext_hf.encoders import load_encoder

    encoder = load_encoder(str(tmp_path), pooling="model" if family.name == "laser3" else None)
    vectors = encoder.encode([overlong, kept])
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)
