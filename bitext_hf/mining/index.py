"""Approximate neighbourhoods for mining with FAISS indexes, chosen by corpus size; the exact engine stays the reference.

``index`` is "exact" (the one-pass engine of :mod:`bitext_hf.mining.knn`), "auto" (:func:`choose_index`: exact while
the similarity matrix is cheap, then IVF-Flat, then OPQ/IVF/PQ as production pipelines such as stopes do), or any
FAISS factory string (e.g. "IVF1024,Flat", "OPQ64,IVF4096,PQ64"), built for inner product.

Both directions need neighbourhoods: the forward ones (each source among the targets) and the backward ones (each
target among the sources). Unlike the exact engine, an index cannot read both from one pass, so two indexes are built:
one over the targets, one over the sources. They are trained ONCE, on a seeded sample drawn from both sides (they are
the same embedding space), and the trained empty index is cloned for the second side: training, the costliest fixed
step, is paid once. IVF indexes are searched list by list with FAISS's ``big_batch_search`` (the queries of each
inverted list against its vectors as one matrix product), which is much faster than query-by-query search for the
whole-corpus query batches of mining.

The similarities that reach the margin are always exact: the candidates an index returns are re-scored with the
embeddings themselves (a compressed index returns 4 k candidates for that), so approximation can only miss
neighbours, never distort a score. A query whose probed cells hold fewer than k vectors is searched exactly. The
margin and retrieval code is the exact path's: a :class:`~bitext_hf.mining.knn.BidirectionalKNN` goes to
:func:`~bitext_hf.mining.retrieval.retrieve`.

Quality is measured, not assumed: :func:`check_recall` and :func:`recall_at_k` compare the approximate neighbours of
sampled sources with exact search.
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from bitext_hf.data.embeddings import check_embeddings
from bitext_hf.errors import UsageError
from bitext_hf.mining.knn import (
    BidirectionalKNN,
    bidirectional_knn_unchecked,
    check_k,
    check_pair,
    knn_search,
)

__all__ = [
    "EXACT_MAX_PAIRS",
    "FLAT_MAX_BYTES",
    "IndexSpec",
    "RecallReport",
    "auto_ivf_flat",
    "auto_nprobe",
    "auto_opq_pq",
    "check_index",
    "check_recall",
    "choose_index",
    "recall_at_k",
    "resolve_index",
    "search_neighbours",
    "search_neighbours_unchecked",
]

logger = logging.getLogger(__name__)

# "auto" stays exact while the corpus has at most this many sentence pairs (N * M), whatever the dimension: the
# exact product and an IVF index's training and list scans all grow with d, so where the index starts to pay
# depends on N and M only. The bound sits at the crossover of the costliest condition measured (two threads on a
# busy machine, where FAISS's waiting threads spin), so that "auto" never takes more CPU time than exact search
# (benchmarks/README.md, "Where an index pays").
EXACT_MAX_PAIRS = 80_000 * 80_000
# IVF-Flat keeps a float32 copy of each side; beyond this many bytes for the larger side, "auto" compresses with
# OPQ/PQ (64 bytes a vector) as stopes does for CCMatrix/NLLB (8 GiB: 2.8M sentences at d = 768).
FLAT_MAX_BYTES = 8 << 30
# Inverted lists: about AUTO_LISTS_PER_ROOT * sqrt(n) (a power of two), which balances the centroid products of a
# query (nlist) against its list scans (nprobe * n / nlist); stopes' 4k lists at ~100k and 262k at 500M are
# ~12 sqrt(n). k-means trains on TRAIN_POINTS_PER_LIST points a list (FAISS warns below 39).
AUTO_LISTS_PER_ROOT = 4
# A query scans AUTO_NPROBE lists, and at least AUTO_PROBED_SHARE of them: a fixed number of lists is a shrinking
# share of a growing index, and the pairs it keeps shrink with it. The share is the smallest measured that keeps 99%
# of the exact pairs above margin 1.2 at 200k x 200k, and no larger than AUTO_NPROBE's share of the lists at auto's
# exact bound, where the crossover was measured (benchmarks/README.md, "Where an index pays").
AUTO_NPROBE = 64
AUTO_PROBED_SHARE = 3 / 64
TRAIN_POINTS_PER_LIST = 40
# Alternations of rotation and codebooks when training an OPQ rotation (FAISS's default is 50).
OPQ_ITERATIONS = 10
# A compressed index (PQ, SQ) orders candidates by approximate scores: take this many times k, re-score exactly.
_RERANK_FACTOR = 4
# Rows re-scored at once: bounds the gathered candidate block to rows * k * d floats.
RERANK_ROWS = 8192


@dataclass(frozen=True)
class IndexSpec:
    """A resolved search: ``factory`` is "exact" or a FAISS factory string; ``nprobe`` the IVF cells a query scans
    (None: not an IVF index, or exact)."""

    factory: str
    nprobe: int | None = None

    @property
    def exact(self) -> bool:
        return self.factory == "exact"

    def __str__(self) -> str:
        return self.factory if self.nprobe is None else f"{self.factory} (nprobe {self.nprobe})"


@dataclass(frozen=True)
class RecallReport:
    """recall@k of approximate forward neighbours: the share of the exact top-k of ``queries`` sampled sources that
    the approximate search found."""

    recall: float
    queries: int
    k: int
    index: str

    def __str__(self) -> str:
        return f"recall@{self.k} {self.recall:.4f} on {self.queries} sampled sources ({self.index} vs exact search)"


def _pow2(value: float) -> int:
    return 1 << max(0, round(math.log2(max(1.0, value))))


def choose_index(n_src: int, n_tgt: int, dim: int) -> IndexSpec:
    """What ``index="auto"`` searches with for ``n_src`` x ``n_tgt`` sentences of dimension ``dim``.

    - exact (the one-pass engine) while ``n_src * n_tgt <= EXACT_MAX_PAIRS``;
    - "IVF<n>,Flat" (exact vectors in inverted lists) while the larger side's float32 vectors fit FLAT_MAX_BYTES;
    - then "OPQ64,IVF<n>,PQ64" (64-byte codes; OPQ64_<d'> when d is not a multiple of 64).

    The number of lists n is a power of two near AUTO_LISTS_PER_ROOT * sqrt(size of the larger side), capped so that
    each list gets TRAIN_POINTS_PER_LIST training points; nprobe is :func:`auto_nprobe` of n.
    """
    if n_src * n_tgt <= EXACT_MAX_PAIRS:
        return IndexSpec("exact")
    if max(n_src, n_tgt) * dim * 4 <= FLAT_MAX_BYTES or dim < 64:
        return auto_ivf_flat(n_src, n_tgt)
    return auto_opq_pq(n_src, n_tgt, dim)


def auto_nprobe(nlist: int) -> int:
    """The lists a query scans in an index of ``nlist`` lists when the user does not say: AUTO_NPROBE, and at least
    AUTO_PROBED_SHARE of them (at most all)."""
    return min(nlist, max(AUTO_NPROBE, round(nlist * AUTO_PROBED_SHARE)))


def _auto_nlist(n_src: int, n_tgt: int) -> int:
    n = max(n_src, n_tgt)
    return min(_pow2(AUTO_LISTS_PER_ROOT * math.sqrt(n)), max(1, (n_src + n_tgt) // TRAIN_POINTS_PER_LIST))


def auto_ivf_flat(n_src: int, n_tgt: int) -> IndexSpec:
    """The IVF-Flat index and nprobe that "auto" chooses for this many sentences (whatever their dimension)."""
    nlist = _auto_nlist(n_src, n_tgt)
    return IndexSpec(f"IVF{nlist},Flat", auto_nprobe(nlist))


def auto_opq_pq(n_src: int, n_tgt: int, dim: int) -> IndexSpec:
    """The OPQ/IVF/PQ index and nprobe that "auto" chooses for large corpora (64-byte codes; the OPQ rotation
    outputs a multiple of 64 dimensions)."""
    nlist = _auto_nlist(n_src, n_tgt)
    opq = "OPQ64" if dim % 64 == 0 else f"OPQ64_{dim - dim % 64}"
    return IndexSpec(f"{opq},IVF{nlist},PQ64", auto_nprobe(nlist))


def build_factory_index(dim: int, factory: str) -> Any:
    import faiss

    return faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)


# What a factory string is checked against before the encoder's dimension is known (a text side, not yet encoded):
# a multiple of most sub-quantizer and OPQ counts, so that only the string's syntax is judged; the encoded dimension
# is checked when it is known. Messages never name it: it is not the data's dimension.
STAND_IN_DIMENSION = 3840


def check_index(index: str, dim: int | None, nprobe: int | None = None) -> None:
    """Refuse an index that cannot work, before any work: not "exact", "auto" or a FAISS factory string valid for
    dimension ``dim`` (None: not known yet, the string's syntax only); nprobe that is not an integer >= 1, or given for
    an index without inverted lists.

    Raises:
        UsageError: one line naming the index and the reason.
    """
    if not isinstance(index, str) or not index.strip():
        raise UsageError(f"index must be 'exact', 'auto' or a FAISS factory string, got {index!r}")
    if nprobe is not None and (isinstance(nprobe, bool) or not isinstance(nprobe, (int, np.integer)) or nprobe < 1):
        raise UsageError(f"nprobe must be an integer >= 1, got {nprobe!r}")
    if index == "auto":
        return
    if index == "exact":
        if nprobe is not None:
            raise UsageError("nprobe applies to IVF indexes, not to index 'exact'")
        return
    try:
        built = build_factory_index(STAND_IN_DIMENSION if dim is None else dim, index)
    except RuntimeError as error:  # FAISS reports a bad string or dimension as RuntimeError with a C++ trace
        reason = str(error).strip().splitlines()
        detail = next((line.split("Error: ")[-1] for line in reason if "Error" in line), reason[0] if reason else "")
        # "Error in <C++ signature> at index_factory.cpp:1228: could not parse ...": the reason follows the place.
        detail = re.split(r"\.(?:cpp|h):\d+: ", detail)[-1]
        what = "a FAISS factory string" if dim is None else f"a FAISS factory string for dimension {dim}"
        raise UsageError(
            f"index {index!r} is not {what}: {detail.strip() or 'refused'} "
            "(examples: 'IVF1024,Flat', 'OPQ64,IVF4096,PQ64', or 'exact' / 'auto')"
        ) from None
    if nprobe is not None and ivf_of(built) is None:
        raise UsageError(f"nprobe applies to IVF indexes; {index!r} has no inverted lists")


def resolve_index(index: str, n_src: int, n_tgt: int, dim: int | None, *, nprobe: int | None = None) -> IndexSpec:
    """The search that ``index`` and ``nprobe`` mean for this corpus (checked with :func:`check_index`; ``dim`` None:
    not known yet, resolved for :data:`STAND_IN_DIMENSION`).

    "auto" is :func:`choose_index` (an explicit ``nprobe`` replaces its choice); a factory string with inverted lists
    scans ``nprobe`` cells (default: FAISS's 1 would miss most neighbours, so :func:`auto_nprobe` of its lists),
    capped at its lists.
    """
    check_index(index, dim, nprobe)
    dim = STAND_IN_DIMENSION if dim is None else dim
    if index == "auto":
        spec = choose_index(n_src, n_tgt, dim)
        if spec.exact or nprobe is None:
            return spec
        return IndexSpec(spec.factory, min(nprobe, _nlist(dim, spec.factory)))
    if index == "exact":
        return IndexSpec("exact")
    built = build_factory_index(dim, index)
    ivf = ivf_of(built)  # a view into `built`, which must outlive it (FAISS frees the parts with the whole)
    if ivf is None:
        return IndexSpec(index)
    if ivf.nlist > n_src + n_tgt:
        raise UsageError(
            f"index {index!r} has {ivf.nlist} lists but there are only {n_src + n_tgt} sentences to train them on; "
            "use fewer lists or index 'auto'"
        )
    return IndexSpec(index, min(nprobe, ivf.nlist) if nprobe else auto_nprobe(ivf.nlist))


def _nlist(dim: int, factory: str) -> int:
    """The inverted lists of an IVF factory string."""
    built = build_factory_index(dim, factory)
    return int(ivf_of(built).nlist)  # read while `built`, which owns the IVF part, is alive


def ivf_of(index: Any) -> Any:
    """The IVF part of an index (inside pre-transforms), or None. A view owned by ``index``: keep ``index`` alive
    while it is used."""
    import faiss

    try:
        return faiss.downcast_index(faiss.extract_index_ivf(index))
    except RuntimeError:
        return None


def _train_sample(src: np.ndarray, tgt: np.ndarray, size: int, seed: int) -> np.ndarray:
    """``size`` rows drawn from both sides in proportion to their sizes, seeded (a reproducible index)."""
    rng = np.random.default_rng(seed)
    n, m = src.shape[0], tgt.shape[0]
    size = min(size, n + m)
    rows = np.sort(rng.choice(n + m, size=size, replace=False))
    from_src, from_tgt = rows[rows < n], rows[rows >= n] - n
    return np.concatenate([src[from_src], tgt[from_tgt]])


def _training_points(index: Any) -> int:
    """Points to train ``index`` on: TRAIN_POINTS_PER_LIST per inverted list, and enough for its PQ codebooks."""
    import faiss

    ivf = ivf_of(index)
    points = TRAIN_POINTS_PER_LIST * (ivf.nlist if ivf is not None else 1)
    pq = None
    for candidate in (ivf, index):
        if candidate is not None and hasattr(faiss.downcast_index(candidate), "pq"):
            pq = faiss.downcast_index(candidate).pq
    if pq is not None:
        points = max(points, TRAIN_POINTS_PER_LIST * pq.ksub)
    return max(points, 1000)


def _gpu_available() -> bool:
    """FAISS built with CUDA (the ``gpu`` extra) and a GPU that torch sees too."""
    import faiss

    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
        return False
    import torch

    return torch.cuda.is_available()


def _to_gpu(index: Any) -> Any:
    """``index`` on every GPU, or None when FAISS has no GPU version of it (e.g. OPQ): the CPU then serves."""
    import faiss

    try:
        return faiss.index_cpu_to_all_gpus(index)
    except RuntimeError as error:
        logger.warning("FAISS cannot put this index on the GPU (%s); using the CPU", str(error).splitlines()[0])
        return None


def train_index(spec: IndexSpec, src: np.ndarray, tgt: np.ndarray, seed: int, use_gpu: bool) -> Any:
    """A trained, empty CPU index of ``spec`` (trained on the GPU when ``use_gpu``)."""
    import faiss

    index = build_factory_index(src.shape[1], spec.factory)
    ivf = ivf_of(index)
    if ivf is not None:
        # Rough centroids are enough: cells only route queries, and the scores are re-computed exactly. Training
        # time grows with sample x iterations.
        ivf.cp.niter = 10
        ivf.cp.seed = seed
        if hasattr(ivf, "do_polysemous_training"):
            # The factory turns on polysemous training for IVF-PQ: minutes of annealing for a code order only
            # Hamming-distance filtering uses, which this search does not.
            ivf.do_polysemous_training = False
    if isinstance(index, faiss.IndexPreTransform):
        for position in range(index.chain.size()):
            transform = faiss.downcast_VectorTransform(index.chain.at(position))
            if isinstance(transform, faiss.OPQMatrix):
                # FAISS's 50 alternations of rotation and PQ dominate everything else at every corpus size (the
                # timings are in benchmarks/README.md); a rougher rotation only reorders the candidates, which
                # are re-scored exactly.
                transform.niter = OPQ_ITERATIONS
    sample = _train_sample(src, tgt, _training_points(index), seed)
    start = time.perf_counter()
    on_gpu = _to_gpu(index) if use_gpu else None
    if on_gpu is not None:
        on_gpu.train(sample)
        index = faiss.index_gpu_to_cpu(on_gpu)
    else:
        index.train(sample)  # PQ and OPQ start from FAISS's fixed default seeds: reproducible too
    logger.debug("trained %s on %d points in %.2fs", spec, sample.shape[0], time.perf_counter() - start)
    return index


def fill_index(trained: Any, database: np.ndarray, nprobe: int | None, use_gpu: bool) -> tuple[Any, bool]:
    """A copy of the trained empty index filled with ``database``, scanning ``nprobe`` cells; and whether it is on
    the GPU (``use_gpu`` and FAISS has a GPU version of it)."""
    import faiss

    index = faiss.clone_index(trained)
    on_gpu = _to_gpu(index) if use_gpu else None
    use_gpu = on_gpu is not None
    index = on_gpu if use_gpu else index
    index.add(database)
    if nprobe is not None:
        space = faiss.GpuParameterSpace() if use_gpu else faiss.ParameterSpace()
        space.set_index_parameter(index, "nprobe", int(nprobe))
    return index, use_gpu


def search_filled(index: Any, queries: np.ndarray, k: int, use_gpu: bool) -> tuple[np.ndarray, np.ndarray]:
    """(approximate similarities, candidate indices), each (n, k), of ``queries`` in a filled index; -1 where fewer
    than k were found."""

    if use_gpu:
        return index.search(queries, k)
    inner, transformed = pretransformed(index, queries)
    if scanned_list_by_list(inner):
        return list_by_list(inner, transformed, k)
    return index.search(queries, k)


def pretransformed(index: Any, queries: np.ndarray) -> tuple[Any, np.ndarray]:
    """The index inside ``index``'s pre-transforms (e.g. OPQ) and ``queries`` as it sees them: rotated as the index
    rotates its vectors."""
    import faiss

    inner, transformed = faiss.downcast_index(index), queries
    if isinstance(inner, faiss.IndexPreTransform):
        for position in range(inner.chain.size()):
            transformed = faiss.downcast_VectorTransform(inner.chain.at(position)).apply(transformed)
        inner = faiss.downcast_index(inner.index)
    return inner, np.ascontiguousarray(transformed, dtype=np.float32)


def scanned_list_by_list(index: Any) -> bool:
    """Whether a CPU search scans ``index`` one inverted list at a time (:func:`list_by_list`). Codes of residuals
    (IVF-PQ, IVF-SQ by default) are searched by FAISS itself: big_batch_search's blocks subtract the centroid from
    the queries, which is right for L2 but not for inner products."""
    import faiss

    return type(index) is faiss.IndexIVFFlat or (
        type(index) in (faiss.IndexIVFPQ, faiss.IndexIVFScalarQuantizer) and not index.by_residual
    )


def _search(trained: Any, database: np.ndarray, queries: np.ndarray, k: int, nprobe: int | None, use_gpu: bool):
    """Candidate indices (n, k) of ``queries`` among ``database``, through a copy of the trained empty index filled
    with it; -1 where fewer than k were found."""
    index, use_gpu = fill_index(trained, database, nprobe, use_gpu)
    return search_filled(index, queries, k, use_gpu)[1]


def list_by_list(
    index: Any, queries: np.ndarray, k: int, lists: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Search of a whole-corpus query batch in an IVF index, one inverted list at a time: the queries that probe a
    list against its vectors as one matrix product (FAISS's ``big_batch_search``), far faster than one query at a
    time for mining's batches.

    The loop of ``faiss.contrib.big_batch_search.big_batch_search`` written out over its own classes (about ten
    lines), because no setting of that function is silent on stdout, where it would corrupt pairs written there:
    ``verbose=0`` prints a progress line per list (``BigBatchSearcher.report``), ``verbose>0`` prints its timings
    (``tic``/``toc``); redirecting ``sys.stdout`` around the call would silence other threads' output too.

    ``lists``: the lists each query probes (n, nprobe), when they are known already (Ray's tile tasks assign a
    tile once for all shards); otherwise the quantizer finds them here."""
    from faiss.contrib.big_batch_search import BigBatchSearcher, BlockComputer

    searcher = BigBatchSearcher(index, queries, k, verbose=0)
    computer = BlockComputer(index, method="knn_function")
    searcher.decode_func, searcher.by_residual = computer.decode_func, computer.by_residual
    if lists is None:
        searcher.coarse_quantization()
    else:  # what coarse_quantization stores, and all the scan reads of it; a writable copy (sorted in place)
        searcher.q_assign = np.array(lists, dtype=np.int32)
    searcher.reorder_assign()
    for cell in range(index.nlist):
        query_ids, cell_queries, cell_ids, cell_vectors = searcher.prepare_bucket(cell)
        sims, positions = computer.block_search(cell_queries, cell_vectors, cell_ids, k)
        searcher.add_results_to_heap(query_ids, sims, cell_ids, positions)
    searcher.rh.finalize()
    return searcher.rh.D, searcher.rh.I


def candidate_sims(queries: np.ndarray, database: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Exact inner product of each query with each of its candidates (rows of ``database``); -inf for a missing
    candidate (-1)."""
    block = np.einsum("id,icd->ic", queries, database[np.maximum(candidates, 0)], dtype=np.float32)
    block[candidates < 0] = -np.inf
    return block


def best_candidates(block: np.ndarray, candidates: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best candidates of each row by exact similarity ``block``; ties keep the index's order."""
    order = np.argsort(-block, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(block, order, axis=1), np.take_along_axis(candidates, order, axis=1)


def _rescore(queries: np.ndarray, database: np.ndarray, candidates: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """Exact inner products of each query with its candidates, the best k first. Queries with a missing candidate
    (-1: their probed cells held fewer than needed) are searched exactly instead.

    By hand rather than FAISS's IndexRefineFlat: that keeps a second copy of the database inside the index, while
    the embeddings are already here."""
    n = queries.shape[0]
    k = min(k, database.shape[0])
    sims = np.empty((n, k), dtype=np.float32)
    indices = np.empty((n, k), dtype=np.int64)
    for start in range(0, n, RERANK_ROWS):
        rows = slice(start, start + RERANK_ROWS)
        cand = candidates[rows].astype(np.int64)
        sims[rows], indices[rows] = best_candidates(candidate_sims(queries[rows], database, cand), cand, k)
    missing = np.flatnonzero((indices < 0).any(axis=1))
    if missing.size:
        logger.debug("%d queries found fewer than %d neighbours in their cells: searched exactly", missing.size, k)
        sims[missing], indices[missing] = knn_search(queries[missing], database, k, normalize=False)
    return sims, indices


def candidate_count(spec: IndexSpec, k: int, database: np.ndarray) -> int:
    """Candidates to ask the index for: k from exact vectors, more from compressed ones (re-scored exactly)."""
    return min(database.shape[0], k if spec.factory.endswith("Flat") else _RERANK_FACTOR * k)


def search_neighbours(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int = 4,
    *,
    index: str | IndexSpec = "exact",
    nprobe: int | None = None,
    seed: int = 0,
    device: str | None = None,
    show_progress: bool = False,
) -> BidirectionalKNN:
    """Neighbourhoods of both sides, exact or through an index (see the module docstring): both sides validated
    and L2-normalized (:func:`~bitext_hf.mining.knn.check_pair`), then :func:`search_neighbours_unchecked`, whose
    arguments the others are.

    Raises:
        UsageError: an index that cannot work for this corpus (:func:`check_index`), k out of range.
        DataValidationError: unusable embeddings, or two dimensions.
    """
    src, tgt = check_pair(src, tgt, "source embeddings", "target embeddings")
    return search_neighbours_unchecked(
        src, tgt, k, index=index, nprobe=nprobe, seed=seed, device=device, show_progress=show_progress
    )


def search_neighbours_unchecked(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int = 4,
    *,
    index: str | IndexSpec = "exact",
    nprobe: int | None = None,
    seed: int = 0,
    device: str | None = None,
    show_progress: bool = False,
) -> BidirectionalKNN:
    """:func:`search_neighbours` for sides that went through :func:`~bitext_hf.mining.knn.check_pair` already (the
    mining job validates each input once, when it is read).

    Args:
        src (np.ndarray): validated, L2-normalized source embeddings.
        tgt (np.ndarray): validated, L2-normalized target embeddings of the same dimension.
        k: neighbours per sentence, capped at the other side's size.
        index: "exact", "auto", a FAISS factory string, or a resolved :class:`IndexSpec`.
        nprobe: IVF cells a query scans (more: slower, closer to exact); default as :func:`resolve_index`.
        seed: of the training sample and k-means: the same inputs give the same index and the same neighbours.
        device: "cpu" keeps FAISS on the CPU even when the ``gpu`` extra and a GPU are present; the exact engine
            uses it as :func:`~bitext_hf.mining.knn.bidirectional_knn` does.

    Raises:
        UsageError: an index that cannot work for this corpus (:func:`check_index`), k out of range.
    """
    check_k(k, src.shape[0], tgt.shape[0])
    if isinstance(index, IndexSpec):
        spec = index
    else:
        spec = resolve_index(index, src.shape[0], tgt.shape[0], src.shape[1], nprobe=nprobe)
    if spec.exact:
        return bidirectional_knn_unchecked(src, tgt, k, device=device, show_progress=show_progress)
    use_gpu = device != "cpu" and _gpu_available()
    start = time.perf_counter()
    trained = train_index(spec, src, tgt, seed, use_gpu)
    train_s = time.perf_counter() - start
    results = []
    for queries, database in ((src, tgt), (tgt, src)):  # one filled index at a time: one copy of one side
        candidates = _search(trained, database, queries, candidate_count(spec, k, database), spec.nprobe, use_gpu)
        results.append(_rescore(queries, database, candidates, k))
    logger.info(
        "index %s: %d x %d, d=%d, trained in %.1fs, both directions in %.1fs%s",
        spec,
        src.shape[0],
        tgt.shape[0],
        src.shape[1],
        train_s,
        time.perf_counter() - start,
        " (GPU)" if use_gpu else "",
    )
    (fwd_sims, fwd_idx), (bwd_sims, bwd_idx) = results
    return BidirectionalKNN(fwd_sims, fwd_idx, bwd_sims, bwd_idx)


def _sample_rows(n: int, queries: int, seed: int) -> np.ndarray:
    if isinstance(queries, bool) or not isinstance(queries, (int, np.integer)) or queries < 1:
        raise UsageError(f"the number of recall queries must be an integer >= 1, got {queries!r}")
    return np.sort(np.random.default_rng(seed).choice(n, size=min(int(queries), n), replace=False))


def _recall(src: np.ndarray, tgt: np.ndarray, rows: np.ndarray, found: np.ndarray, index: str) -> RecallReport:
    """Share of the exact top-k of sources ``rows`` that ``found`` (their approximate top-k) holds."""
    k = found.shape[1]
    _, exact = knn_search(src[rows], tgt, k, normalize=False)
    hits = sum(len(set(a) & set(b)) for a, b in zip(exact.tolist(), found.tolist()))
    return RecallReport(hits / exact.size, int(rows.size), k, index)


def recall_at_k(
    src: np.ndarray, tgt: np.ndarray, knn: BidirectionalKNN, *, queries: int = 1000, seed: int = 0, index: str = ""
) -> RecallReport:
    """recall@k of ``knn``'s forward neighbours on ``queries`` sampled sources (seeded) against exact search; costs
    ``queries`` exact searches. ``src`` / ``tgt``: the normalized embeddings the neighbours were searched with;
    ``index`` names the search in the report."""
    rows = _sample_rows(src.shape[0], queries, seed)
    return _recall(src, tgt, rows, knn.forward_indices[rows], index)


def check_recall(
    src: np.ndarray,
    tgt: np.ndarray,
    *,
    k: int = 4,
    index: str = "auto",
    nprobe: int | None = None,
    queries: int = 1000,
    seed: int = 0,
) -> RecallReport:
    """recall@k of ``index`` (built as :func:`search_neighbours` builds it, with its default seed) on ``queries``
    sources sampled with ``seed``, against exact search.

    Builds only the forward index (over the targets) and searches only the sampled sources; with a run's
    neighbours at hand, :func:`recall_at_k` needs no index at all."""
    src, tgt = check_embeddings(src, "source embeddings"), check_embeddings(tgt, "target embeddings")
    check_k(k, src.shape[0], tgt.shape[0])
    spec = resolve_index(index, src.shape[0], tgt.shape[0], src.shape[1], nprobe=nprobe)
    rows = _sample_rows(src.shape[0], queries, seed)
    if spec.exact:
        return RecallReport(1.0, int(rows.size), min(k, tgt.shape[0]), str(spec))
    use_gpu = _gpu_available()
    trained = train_index(spec, src, tgt, 0, use_gpu)
    candidates = _search(trained, tgt, src[rows], candidate_count(spec, k, tgt), spec.nprobe, use_gpu)
    _, found = _rescore(src[rows], tgt, candidates, k)
    return _recall(src, tgt, rows, found, str(spec))
