"""OneAligner's family folder: text-level scoring and retrieval, the two-stage search for large candidate sets, and
the training pieces (data, loss, evaluation, model card).

The model (``bitext_hf.modeling.onealigner``) is what ships to the hub and knows nothing of text files, tokenizers or
FAISS; these functions take ``(model, tokenizer, texts, ...)`` and use only its public methods:

>>> from bitext_hf.families import onealigner
>>> matrix = onealigner.similarity_matrix(model, tokenizer, sources, targets)  # (n_source, n_target), blocks of 256
>>> scores, indices = onealigner.two_stage_retrieve(model, tokenizer, sources, targets, top_k=64)

``scoring``: tokenize, encode, block-wise similarity matrix, top-1 retrieval, pair scores, candidate re-ranking,
block normalization of a matrix and retrieval accuracy (what the training recipe reports). ``two_stage``: the
first stages (token-level FAISS neighbours, or mean-pooled kNN) in front of the re-ranking, with ``token_gain``'s
kernel. What ``recipes/train_onealigner.py`` uses, in the files every family has: ``arguments``
(``ScriptArguments``), ``data`` (``load_data``: the example budget), ``losses`` (``OneAlignerLoss``), ``evaluation``
(retrieval on the evaluation sets, the Trainer's evaluator), ``export`` (``save_outputs``, ``model_card``,
``card_figures``) and ``recipe`` (``check_arguments``, the tokenizer and the model).
"""

from __future__ import annotations

from bitext_hf.families.onealigner.evaluation import OneAlignerRetrievalEvaluator, evaluate_sets
from bitext_hf.families.onealigner.export import card_figures, model_card, results_table, save_outputs
from bitext_hf.families.onealigner.losses import OneAlignerLoss
from bitext_hf.families.onealigner.scoring import (
    OneAlignerDataError,
    OneAlignerUsageError,
    encode,
    encode_tokens,
    fit_idf,
    normalize_blocks,
    pad_token_ids,
    rerank,
    rerank_encoded,
    retrieval_accuracy,
    retrieve,
    score_pairs,
    similarity_matrix,
    tokenize,
)
from bitext_hf.families.onealigner.two_stage import FIRST_STAGES, token_candidates, two_stage_retrieve

__all__ = [
    "FIRST_STAGES",
    "OneAlignerDataError",
    "OneAlignerLoss",
    "OneAlignerRetrievalEvaluator",
    "OneAlignerUsageError",
    "card_figures",
    "encode",
    "encode_tokens",
    "evaluate_sets",
    "fit_idf",
    "model_card",
    "normalize_blocks",
    "pad_token_ids",
    "rerank",
    "rerank_encoded",
    "results_table",
    "retrieval_accuracy",
    "retrieve",
    "save_outputs",
    "score_pairs",
    "similarity_matrix",
    "token_candidates",
    "tokenize",
    "two_stage_retrieve",
]
