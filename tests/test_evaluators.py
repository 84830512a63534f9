"""The four families' retrieval evaluators share one base in sentence-transformers' shape: each declares its primary
metric and direction, returns a flat dict of floats, and prefixes every key (the primary metric's too) with its
name when given one. Tiny random models on the tiny corpus; the numbers themselves are the family tests' concern."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from bitext_hf.data import PairSet
from bitext_hf.evaluation import RetrievalEvaluator

N = 8  # held-out pairs per language: enough for xsim's k=4 and MuSR's BUCC-style half


def _held_out(corpus: dict[str, list[tuple[str, str]]]) -> dict[str, PairSet]:
    """de and fr against the same English rows (MuSR needs multi-way sets)."""
    return {
        language: PairSet(
            language, "en", "tiny", [xx for _, xx in corpus[language][:N]], [en for en, _ in corpus[language][:N]]
        )
        for language in ("de", "fr")
    }


def laser3(tokenizer: Any, corpus: dict, tmp_path: Any, name: str) -> tuple[RetrievalEvaluator, torch.nn.Module]:
    from bitext_hf.families.laser3 import StudentEncoder, TeacherEmbeddingCache, XsimEvaluator
    from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig

    torch.manual_seed(0)
    config = Laser3StudentConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        projection_dim=16,
    )
    student = Laser3Student(config).eval()
    teacher = StudentEncoder(Laser3Student(config).eval(), tokenizer, max_length=64)
    cache = TeacherEmbeddingCache(tmp_path, teacher, "teacher")
    return XsimEvaluator(tokenizer, cache, list(_held_out(corpus).values()), name=name), student


def musr(tokenizer: Any, corpus: dict, tmp_path: Any, name: str) -> tuple[RetrievalEvaluator, torch.nn.Module]:
    from bitext_hf.families.musr import MuSREvaluator
    from bitext_hf.modeling.musr import MuSRConfig, MuSREncoderDecoder

    torch.manual_seed(0)
    config = MuSRConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_encoder_layers=1,
        num_decoder_layers=1,
        num_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
    )
    return MuSREvaluator(tokenizer, _held_out(corpus), "fr", name=name), MuSREncoderDecoder(config).eval()


def onealigner(tokenizer: Any, corpus: dict, tmp_path: Any, name: str) -> tuple[RetrievalEvaluator, torch.nn.Module]:
    from onealigner_helpers import tiny_aligner

    from bitext_hf.families.onealigner import OneAlignerRetrievalEvaluator

    eval_sets = {f"{pairs.src_lang}-en": (pairs.src, pairs.tgt) for pairs in _held_out(corpus).values()}
    return OneAlignerRetrievalEvaluator(tokenizer, eval_sets, name=name), tiny_aligner(tokenizer)


def alignment(tokenizer: Any, corpus: dict, tmp_path: Any, name: str) -> tuple[RetrievalEvaluator, torch.nn.Module]:
    from bitext_hf.families.contrastive_align import AlignmentEvalSet, AlignmentRetrievalEvaluator
    from bitext_hf.modeling.contrastive_align import ContrastiveAlignConfig, ContrastiveAlignedEncoder

    torch.manual_seed(0)
    encoder = {
        "model_type": "bert",
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "vocab_size": len(tokenizer),
        "max_position_embeddings": 64,
    }
    model = ContrastiveAlignedEncoder(
        ContrastiveAlignConfig(encoder_config=encoder, objective="linear", languages=["de", "fr"])
    ).eval()
    eval_sets = {}
    for language, pairs in _held_out(corpus).items():
        english, foreign = [text.split() for text in pairs.tgt], [text.split() for text in pairs.src]
        # English first, as AlignmentEvalSet says; the first words linked (the links' quality does not matter here).
        eval_sets[language] = AlignmentEvalSet(pairs.tgt, pairs.src, english, foreign, [[(0, 0)]] * N)
    return AlignmentRetrievalEvaluator(tokenizer, eval_sets, max_length=32, name=name), model


FAMILIES = [
    pytest.param(laser3, "xsim_all", False, id="laser3"),
    pytest.param(musr, "accuracy_en", True, id="musr"),
    pytest.param(onealigner, "accuracy", True, id="onealigner"),
    pytest.param(alignment, "word_accuracy", True, id="contrastive-align"),
]


@pytest.mark.parametrize(("build", "primary", "greater_is_better"), FAMILIES)
def test_each_family_evaluator_declares_its_primary_metric_and_returns_floats(
    build: Callable, primary: str, greater_is_better: bool, tiny_tokenizer, tiny_parallel_corpus_by_language, tmp_path
):
    evaluator, model = build(tiny_tokenizer, tiny_parallel_corpus_by_language, tmp_path, "")
    assert isinstance(evaluator, RetrievalEvaluator)
    assert (evaluator.name, evaluator.primary_metric, evaluator.greater_is_better) == ("", primary, greater_is_better)
    with torch.no_grad():
        metrics = evaluator(model)
    assert primary in metrics
    assert all(type(value) is float for value in metrics.values()), metrics

    named, model = build(tiny_tokenizer, tiny_parallel_corpus_by_language, tmp_path, "dev")
    assert named.primary_metric == f"dev_{primary}" and named.greater_is_better is greater_is_better
    with torch.no_grad():
        prefixed = named(model)
    assert prefixed == {f"dev_{key}": value for key, value in metrics.items()}


def test_the_base_prefixes_like_sentence_transformers():
    class Fixed(RetrievalEvaluator):
        def __init__(self, name: str = "") -> None:
            super().__init__(primary_metric="xsim", greater_is_better=False, name=name)

        def compute_metrics(self, model):
            return {"xsim": torch.tensor(2.5), "accuracy": 1}

    assert Fixed()(None) == {"xsim": 2.5, "accuracy": 1.0}
    assert Fixed("flores")(None) == {"flores_xsim": 2.5, "flores_accuracy": 1.0}
    assert Fixed("flores").primary_metric == "flores_xsim"
    with pytest.raises(TypeError):
        RetrievalEvaluator(primary_metric="xsim", greater_is_better=False)  # compute_metrics is abstract
