"""Reading a command's inputs before any expensive work, for ``encode``, ``score`` and ``eval``: the output path
against the inputs, aligned sentences, and the encoders that embed them (loaded once per model, only when needed).
``mine`` reads its inputs in :mod:`bitext_hf.mining.sides` (the mining job, :mod:`bitext_hf.mining.pipeline`).

The mining modules are imported when a function runs, not here: ``--help`` must not import torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bitext_hf.errors import UsageError

__all__ = ["check_encoder_options", "check_inputs_and_output", "display", "embed", "embedder", "pair_texts"]


def display(path: str) -> str:
    """How messages name an input (``<stdin>`` for ``-``), as the readers do."""
    from bitext_hf.data.readers import display_name

    return display_name(path)


def check_inputs_and_output(out: str | None, inputs: Sequence[str | None]) -> None:
    """:func:`bitext_hf.io.check_inputs_and_output`: at most one input is stdin, ``out`` is writable and
    none of the inputs, and the inputs stay protected for the rest of the command."""
    from bitext_hf.io import check_inputs_and_output as check

    check(out, inputs)


# ----------------------------------------------------------------------------------------------------- encoders


def check_encoder_options(args) -> None:
    """Encoder options that cannot act together, refused before anything is read (``mine`` checks its own in
    :class:`~bitext_hf.mining.MiningConfig`)."""
    from bitext_hf.encoding.embedder import refuse_cache_dir_without_cache

    refuse_cache_dir_without_cache(getattr(args, "cache_dir", None), getattr(args, "no_cache", False))


def embedder(args):
    """The run's :class:`~bitext_hf.encoding.embedder.Embedder` from the encoder options (one per run, kept on ``args``:
    each encoder is loaded once, and an unwritable cache is warned about once)."""
    if "_embedder" not in args.__dict__:
        from bitext_hf.encoding.embedder import Embedder

        args._embedder = Embedder(
            model=args.model,
            pooling=args.pooling,
            quantize=getattr(args, "quantize", None),
            backend=getattr(args, "backend", None),
            batch_size=args.batch_size,
            cache_dir=getattr(args, "cache_dir", None),
            no_cache=getattr(args, "no_cache", True),
            show_progress=not args.quiet,
            distributed=getattr(args, "distributed", None),
            ray_address=getattr(args, "ray_address", None),
            workers=getattr(args, "workers", None),
        )
    return args._embedder


def embed(args, texts: list[str], what: str, spec: str | None = None) -> np.ndarray:
    """Embed ``texts`` with the encoder ``spec`` (default ``--model``); each encoder is loaded once per run, and
    not at all when the encoding cache holds these sentences for it."""
    return embedder(args).embed(texts, what, spec)


def pair_texts(args) -> tuple[list[str], list[str]]:
    """Aligned sentences from ``--pairs FILE`` (any pairs file the package writes: ``mine`` / ``score`` output or
    ``data gettext``'s, in TSV, CSV, JSON Lines or Parquet; :func:`bitext_hf.data.readers.read_pairs`) or the
    Moses-style ``--src`` / ``--tgt`` files."""
    from bitext_hf.data import read_moses
    from bitext_hf.data.readers import read_pairs

    if args.pairs:
        if args.src or args.tgt:
            raise UsageError("give either --pairs FILE or --src/--tgt, not both")
        return read_pairs(args.pairs, max_chars=args.max_line_chars)
    if not (args.src and args.tgt):
        raise UsageError("give --pairs FILE.tsv, or --src and --tgt parallel files")
    return read_moses(args.src, args.tgt, max_chars=args.max_line_chars)
