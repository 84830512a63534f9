"""Train a SentencePiece Unigram tokenizer offline, with XLM-R-like special tokens.

Students trained from scratch (e.g. the LASER3 student, paper: "its own SentencePiece vocabulary") need a
vocabulary for their language family, and nothing can be downloaded here. ``train_tokenizer`` learns one from
raw sentences with Google's ``sentencepiece`` trainer and runs it as a ``tokenizers`` Unigram model wrapped in a
``transformers`` fast tokenizer that saves with ``save_pretrained`` and reloads with ``AutoTokenizer.from_pretrained``.

Why ``sentencepiece`` trains and not ``tokenizers``' own ``UnigramTrainer``: the latter is not deterministic. It
collects the corpus's words in a hash map seeded at random in every process, and that order decides the ties of its
seed pieces and the summation order of its EM, so two processes given the same text learn pieces in another order
with other scores (measured: 37 of 1000 ids moved, scores up to 1.4e-3 apart), and a model initialized from the
same seed gets other embedding rows. ``sentencepiece`` sorts the words it counts and, with a fixed thread count
(:data:`TRAINER_THREADS`), sums its EM in a fixed order: the same text gives the same bytes in every process.

Layout (XLM-R's): ``<s>`` = 0 (bos/cls), ``<pad>`` = 1, ``</s>`` = 2 (eos/sep), ``<unk>`` = 3, ``<mask>`` = 4;
single sentences are encoded as ``<s> ... </s>``, pairs as ``<s> A </s></s> B </s>``; no token_type_ids.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from bitext_hf.training.distributed import main_process_first

__all__ = [
    "SPECIAL_TOKENS",
    "TRAINER_THREADS",
    "TokenizerTrainingError",
    "train_or_reuse_tokenizer",
    "train_tokenizer",
]

logger = logging.getLogger(__name__)

BOS_TOKEN, PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, MASK_TOKEN = "<s>", "<pad>", "</s>", "<unk>", "<mask>"
# Order fixes the ids: 0..4, as in XLM-R.
SPECIAL_TOKENS: tuple[str, ...] = (BOS_TOKEN, PAD_TOKEN, EOS_TOKEN, UNK_TOKEN, MASK_TOKEN)
METASPACE = "\u2581"  # "▁", SentencePiece's word-boundary marker
# Below this the EM of the Unigram trainer has nothing to choose from: the "vocabulary" would be the alphabet.
MIN_DISTINCT_TEXTS = 2
# sentencepiece's EM adds up per-thread partial sums, so the vocabulary depends on the thread count: fixed here, not
# taken from the machine, so that every machine learns the same vocabulary from the same text.
TRAINER_THREADS = 4
# sentencepiece skips (with a log line only) sentences longer than its max_sentence_length (4192 bytes by default);
# the corpus is taken whole, as the tokenizers trainer took it.
_MAX_SENTENCE_BYTES = 1 << 20


class TokenizerTrainingError(ValueError):
    """The corpus or the settings cannot produce the requested tokenizer."""


def _normalized_texts(texts: Iterable[str], normalizer: normalizers.Normalizer) -> list[str]:
    """The non-blank texts, normalized as the tokenizer will normalize them (the trainer sees what it will cut)."""
    normalized = []
    for text in texts:
        if not isinstance(text, str):
            raise TokenizerTrainingError(f"train_tokenizer expects strings, got {type(text).__name__}: {text!r}")
        text = normalizer.normalize_str(text)
        if text:
            normalized.append(text)
    return normalized


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
        show_progress: show the trainer's log.

    Normalization is NFKC (SentencePiece's default), and runs of whitespace collapse to one space; words are
    split on whitespace with the ``▁`` marker prepended, so decoding restores the spaces. Pieces follow
    ``sentencepiece``'s defaults otherwise (none spans two scripts, or digits and letters). The same texts give the
    same tokenizer in every process and on every machine.

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

    normalizer = normalizers.Sequence(
        [normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    )
    corpus = _normalized_texts(texts, normalizer)
    if not corpus:
        raise TokenizerTrainingError("cannot train a tokenizer on an empty corpus (no non-blank text)")
    if all(text == corpus[0] for text in corpus):
        raise TokenizerTrainingError(
            f"cannot train a tokenizer on a corpus with fewer than {MIN_DISTINCT_TEXTS} distinct sentences"
        )
    pieces = _sentencepiece_unigram(corpus, vocab_size, max_piece_length, show_progress)
    learned = len(pieces)
    if learned < min_vocab_fraction * vocab_size:
        raise TokenizerTrainingError(
            f"the corpus ({len(corpus)} sentences) supports only {learned} pieces, fewer than "
            f"{min_vocab_fraction:g} x vocab_size={vocab_size}: give more text or lower vocab_size"
        )
    if learned < vocab_size:
        logger.info("Tokenizer learned %d pieces of the %d requested (small corpus)", learned, vocab_size)

    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=SPECIAL_TOKENS.index(UNK_TOKEN), byte_fallback=False))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always")
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    for token_id, token in enumerate(SPECIAL_TOKENS):
        # The special tokens come first, in order; the ids are part of the interface, so check them.
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


def _sentencepiece_unigram(
    corpus: list[str], vocab_size: int, max_piece_length: int, show_progress: bool
) -> list[tuple[str, float]]:
    """(piece, log probability) of a Unigram vocabulary that ``sentencepiece`` learns from ``corpus``, ids in order:
    the special tokens at 0..4 (score 0, as ``tokenizers`` gives them), then the learned pieces."""
    import sentencepiece

    model = io.BytesIO()
    meta = {"bos": BOS_TOKEN, "pad": PAD_TOKEN, "eos": EOS_TOKEN, "unk": UNK_TOKEN}
    meta_pieces = {f"{name}_id": SPECIAL_TOKENS.index(token) for name, token in meta.items()}
    meta_pieces |= {f"{name}_piece": token for name, token in meta.items()}
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(corpus),
            model_writer=model,
            model_type="unigram",
            vocab_size=vocab_size,
            hard_vocab_limit=False,  # a small corpus learns fewer pieces; train_tokenizer judges how many is enough
            max_sentencepiece_length=max_piece_length,
            max_sentence_length=_MAX_SENTENCE_BYTES,
            character_coverage=1.0,  # every character of the corpus gets a piece, none becomes <unk>
            normalization_rule_name="identity",  # the corpus is already normalized by the tokenizer's normalizer
            num_threads=TRAINER_THREADS,
            **meta_pieces,
            user_defined_symbols=[MASK_TOKEN],
            minloglevel=0 if show_progress else 2,
        )
    except RuntimeError as error:  # sentencepiece's own refusals (e.g. a vocabulary smaller than the alphabet)
        message = (str(error).strip().splitlines() or [type(error).__name__])[-1]
        raise TokenizerTrainingError(f"sentencepiece could not train the vocabulary: {message}") from None
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    special = len(SPECIAL_TOKENS)
    learned = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(special, processor.get_piece_size())]
    return [(token, 0.0) for token in SPECIAL_TOKENS] + learned


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

    Why, although training is deterministic: the saved tokenizer is the one the checkpoint's embedding rows were
    trained with, whatever changed since (another ``sentencepiece`` version, another sample of the text).
    """
    folder = Path(output_dir) / subfolder
    with main_process_first() as main:
        if not main:
            # Rank 0 of a distributed job trained and saved it just now: every rank must use the same vocabulary.
            logger.info("reading the tokenizer rank 0 saved in %s", folder)
            return PreTrainedTokenizerFast.from_pretrained(str(folder))
        if reuse and (folder / "tokenizer.json").is_file():
            logger.info("resuming: reusing the tokenizer saved in %s", folder)
            return PreTrainedTokenizerFast.from_pretrained(str(folder))
        if reuse:
            logger.info(
                "resuming, but %s holds no tokenizer: training it again (the same text gives the same one)", folder
            )
        tokenizer = train_tokenizer(texts, **train_kwargs)
        tokenizer.save_pretrained(str(folder))
        return tokenizer
