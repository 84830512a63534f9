"""Train a SentencePiece-style Unigram tokenizer offline, with XLM-R-like special tokens.

Students trained from scratch (e.g. the LASER3 student, paper: "its own SentencePiece vocabulary") need a
vocabulary for their language family, and nothing can be downloaded here. ``train_tokenizer`` learns one from
raw sentences with the ``tokenizers`` library and wraps it as a ``transformers`` fast tokenizer that saves with
``save_pretrained`` and reloads with ``AutoTokenizer.from_pretrained``.

Layout (XLM-R's): ``<s>`` = 0 (bos/cls), ``<pad>`` = 1, ``</s>`` = 2 (eos/sep), ``<unk>`` = 3, ``<mask>`` = 4;
single sentences are encoded as ``<s> ... </s>``, pairs as ``<s> A </s></s> B </s>``; no token_type_ids.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

__all__ = ["SPECIAL_TOKENS", "TokenizerTrainingError", "train_or_reuse_tokenizer", "train_tokenizer"]

logger = logging.getLogger(__name__)

BOS_TOKEN, PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, MASK_TOKEN = "<s>", "<pad>", "</s>", "<unk>", "<mask>"
# Order fixes the ids: 0..4, as in XLM-R.
SPECIAL_TOKENS: tuple[str, ...] = (BOS_TOKEN, PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, MASK_TOKEN)
METASPACE = "\u2581"  # "▁", SentencePiece's word-boundary marker
# Below this the EM of the Unigram trainer has nothing to choose from: the "vocabulary" would be the alphabet.
MIN_DISTINCT_TEXTS = 2


class TokenizerTrainingError(ValueError):
    """The corpus or the settings cannot produce the requested tokenizer."""


def _non_blank(texts: Iterable[str], counter: list[int], distinct: set[str]) -> Iterator[str]:
    """Yield stripped non-blank texts, counting them (the trainer consumes the iterator only once)."""
    for text in texts:
        if not isinstance(text, str):
            raise TokenizerTrainingError(f"train_tokenizer expects strings, got {type(text).__name__}: {text!r}")
        text = text.strip()
        if text:
            counter[0] += 1
            if len(distinct) < MIN_DISTINCT_TEXTS:
                distinct.add(text)
            yield text


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 8000,
    *,
    model_max_length: int = 512,
    min_vocab_fraction: float = 0.5,
    max_piece_length: int = 16,
    show_progress: bool = False,
) -> PreTrainedTokenizerFast:
    """Learn a Unigram vocabulary from ``texts`` and return it as a ``PreTrainedTokenizerFast``.

    Args:
        texts: raw sentences (any iterable, consumed once); blank ones are skipped.
        vocab_size: target vocabulary size, special tokens included.
        model_max_length: the tokenizer's ``model_max_length`` (truncation limit with ``truncation=True``).
        min_vocab_fraction: the corpus must support at least this fraction of ``vocab_size`` pieces; a smaller
            learned vocabulary means the corpus is too small for the request and raises instead of silently
            returning a character-level tokenizer.
        max_piece_length: longest piece, in characters.
        show_progress: show the trainer's progress bars.

    Normalization is NFKC (SentencePiece's default), and runs of whitespace collapse to one space; words are
    split on whitespace with the ``▁`` marker prepended, so decoding restores the spaces.

    Raises:
        TokenizerTrainingError: no non-blank text, fewer than two distinct texts, ``vocab_size`` not larger than
            the special tokens, or a corpus too small for ``min_vocab_fraction * vocab_size`` pieces.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise TokenizerTrainingError(
            f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got vocab_size={vocab_size}"
        )
    if model_max_length < 2:
        raise TokenizerTrainingError(f"model_max_length must be at least 2 (<s> and </s>), got {model_max_length}")
    if not 0.0 <= min_vocab_fraction <= 1.0:
        raise TokenizerTrainingError(f"min_vocab_fraction must be in [0, 1], got {min_vocab_fraction}")
    if isinstance(texts, str):
        raise TokenizerTrainingError("train_tokenizer expects an iterable of sentences, got a single string")

    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        unk_token=UNK_TOKEN,
        max_piece_length=max_piece_length,
        show_progress=show_progress,
    )
    counter, distinct = [0], set()
    tokenizer.train_from_iterator(_non_blank(texts, counter, distinct), trainer=trainer)
    if counter[0] == 0:
        raise TokenizerTrainingError("cannot train a tokenizer on an empty corpus (no non-blank text)")
    if len(distinct) < MIN_DISTINCT_TEXTS:
        raise TokenizerTrainingError(
            f"cannot train a tokenizer on a corpus with fewer than {MIN_DISTINCT_TEXTS} distinct sentences"
        )
    learned = tokenizer.get_vocab_size()
    if learned < min_vocab_fraction * vocab_size:
        raise TokenizerTrainingError(
            f"the corpus ({counter[0]} sentences) supports only {learned} pieces, fewer than "
            f"{min_vocab_fraction:g} x vocab_size={vocab_size}: give more text or lower vocab_size"
        )
    if learned < vocab_size:
        logger.info("Tokenizer learned %d pieces of the %d requested (small corpus)", learned, vocab_size)

    for token_id, token in enumerate(SPECIAL_TOKENS):
        # The trainer places special tokens first, in order; the ids are part of the interface, so check them.
        if tokenizer.token_to_id(token) != token_id:
            raise RuntimeError(f"special token {token!r} got id {tokenizer.token_to_id(token)}, expected {token_id}")
    bos_id, eos_id = tokenizer.token_to_id(BOS_TOKEN), tokenizer.token_to_id(EOS_TOKEN)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A {EOS_TOKEN}",
        pair=f"{BOS_TOKEN} $A {EOS_TOKEN} {EOS_TOKEN} $B {EOS_TOKEN}",
        special_tokens=[(BOS_TOKEN, bos_id), (EOS_TOKEN, eos_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        cls_token=BOS_TOKEN,
        sep_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        pad_token=PAD_TOKEN,
        mask_token=MASK_TOKEN,
        model_max_length=model_max_length,
        padding_side="right",
        model_input_names=["input_ids", "attention_mask"],
    )


def train_or_reuse_tokenizer(
    texts: Iterable[str],
    *,
    output_dir: str | os.PathLike,
    reuse: bool,
    subfolder: str = "tokenizer",
    **train_kwargs,
) -> PreTrainedTokenizerFast:
    """The training run's tokenizer: trained and saved to ``output_dir/subfolder`` at the start of a run, and read
    back from there when the run resumes from a checkpoint (``reuse=True``).

    Why: the `tokenizers` Unigram trainer is not deterministic (its vocabulary differs from one process to the
    next, whatever the seeds), so a resumed run that trained its vocabulary again would pair the checkpoint's
    embedding rows with other pieces.
    """
    folder = Path(output_dir) / subfolder
    if reuse and (folder / "tokenizer.json").is_file():
        logger.info("resuming: reusing the tokenizer saved in %s", folder)
        return PreTrainedTokenizerFast.from_pretrained(str(folder))
    if reuse:
        logger.warning("resuming, but %s holds no tokenizer: training a new one", folder)
    tokenizer = train_tokenizer(texts, **train_kwargs)
    tokenizer.save_pretrained(str(folder))
    return tokenizer
