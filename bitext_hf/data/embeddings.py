"""Sentence embeddings checked before any work: precomputed ones read from ``.npy`` files (:func:`read_embeddings`:
one line naming the file for an empty, truncated, pickled, non-numeric or non-2-D array), and the rows of any
embedding matrix (:func:`check_embeddings`: L2-normalized for cosines, a row that cannot be used refused by
number), which the searches of ``mining`` and the shard folders of ``encoding`` both read."""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os

import numpy as np

from bitext_hf.data.readers import display_name
from bitext_hf.errors import DataValidationError
from bitext_hf.io import compression_of, read_input_bytes

__all__ = ["check_embeddings", "needs_normalizing", "read_embeddings", "refuse_bad_rows", "row_norms"]

# The name of the search module, whose checks these are: a warning about the rows reads the same whichever path
# (an array, a .npy file, a shard folder) brought them.
logger = logging.getLogger("bitext_hf.mining.knn")

_NPY_MAGIC = b"\x93NUMPY"

# check_embeddings reads rows in blocks of this many elements (float64: 32 MiB), so a memory-mapped file is never
# copied whole for the norms. Rows within _UNIT_TOLERANCE of unit length are used as they are (float32 rounding of a
# normalized row is ~1e-7 per element); beyond _WARN_TOLERANCE the input was not normalized and the user is told.
_CHECK_BLOCK_ELEMENTS = 1 << 22
_UNIT_TOLERANCE = 1e-5
_WARN_TOLERANCE = 1e-3
_MAX_RAW_NORM = float(np.sqrt(np.finfo(np.float32).max))


def _check_size(source: str | io.BytesIO, name: str) -> None:
    """The data the header announces is all there: a header claiming a huge shape is refused here, before numpy
    allocates the array it describes (it does so for data read from a stream, before reading a byte of it)."""
    with contextlib.ExitStack() as stack:
        handle = stack.enter_context(open(source, "rb")) if isinstance(source, str) else source
        try:
            version = np.lib.format.read_magic(handle)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(handle)
        except (ValueError, OSError, EOFError) as error:
            if "EOF" in str(error) or isinstance(error, EOFError):
                raise DataValidationError(f"{name}: truncated .npy file (it ends inside its header)") from None
            raise DataValidationError(f"{name}: not a readable .npy file ({error})") from None
        data_start = handle.tell()
        size = os.fstat(handle.fileno()).st_size if isinstance(source, str) else handle.seek(0, io.SEEK_END)
        handle.seek(0)  # np.load reads the in-memory copy from its start
    if dtype.hasobject:
        return  # pickled objects: refused by the loader, which names them
    needed = math.prod(shape) * dtype.itemsize
    if size - data_start < needed:
        raise DataValidationError(
            f"{name}: truncated .npy file: its header announces shape {tuple(shape)} of {dtype} ({needed} bytes of "
            f"data), the file holds {max(size - data_start, 0)}"
        )


def _load(path: str, name: str) -> np.ndarray:
    """Memory-map a plain file (large embeddings need not fit in memory); read streams and compressed files."""
    mappable = path != "-" and os.path.isfile(path) and compression_of(path) is None
    if mappable:
        try:
            with open(path, "rb") as handle:
                head = handle.read(len(_NPY_MAGIC))
        except OSError as error:
            raise DataValidationError(f"{name}: cannot be read ({error.strerror})") from None
        source: str | io.BytesIO = path
    else:
        data = read_input_bytes(path)
        head, source = data[: len(_NPY_MAGIC)], io.BytesIO(data)
    if not head:
        raise DataValidationError(f"{name}: empty file (0 bytes), expected a .npy array of embeddings")
    if head != _NPY_MAGIC:
        raise DataValidationError(f"{name}: not a .npy file (no NumPy header); save embeddings with numpy.save")
    _check_size(source, name)
    try:
        return np.load(source, mmap_mode="r" if mappable else None, allow_pickle=False)
    except ValueError as error:
        text = str(error)
        if "Python objects" in text or "Object arrays" in text:
            raise DataValidationError(
                f"{name}: holds pickled Python objects, not numbers; save a numeric array (e.g. float32)"
            ) from None
        if "mmap length" in text or "EOF" in text or "not fully written" in text:
            raise DataValidationError(f"{name}: truncated .npy file (the data ends before the array does)") from None
        raise DataValidationError(f"{name}: not a readable .npy file ({text})") from None
    except (OSError, EOFError) as error:
        raise DataValidationError(f"{name}: not a readable .npy file ({error})") from None


def read_embeddings(path: str | os.PathLike) -> np.ndarray:
    """A 2-D numeric array (one row per sentence) from a ``.npy`` file, memory-mapped when it is a plain file.

    ``path`` may also be ``-`` (stdin), a pipe or a compressed ``.npy.gz`` / ``.xz`` / ``.bz2`` / ``.zst`` (read
    into memory). Raises ``DataValidationError`` naming the file for anything that is not such an array.
    """
    path = os.fspath(path)
    name = display_name(path)
    array = _load(path, name)
    if array.dtype.kind not in "fiu":
        raise DataValidationError(f"{name}: dtype {array.dtype} is not numeric; expected float embeddings")
    if array.ndim != 2:
        raise DataValidationError(
            f"{name}: expected a 2-D array (one row per sentence), got shape {tuple(array.shape)}"
        )
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise DataValidationError(f"{name}: no embeddings (shape {tuple(array.shape)})")
    return array


def check_embeddings(embeddings: np.ndarray, name: str = "embeddings", *, normalize: bool = True) -> np.ndarray:
    """Validate an embedding matrix and return it as C-contiguous float32 with L2-normalized rows.

    Cosines are inner products of unit vectors only: rows that are not unit length are normalized here, with ONE
    warning (how many rows were off by more than 1e-3). Norms are computed in float64 block by block, so a
    memory-mapped input is read in pieces; an input that is already float32 and unit length is returned without a
    copy, otherwise one float32 copy is filled block by block.

    Args:
        name: what the error messages call the matrix (a file name, or "source embeddings").
        normalize (bool, defaults to True): False keeps the rows as they are (raw inner-product search) and only
            checks that every inner product of two rows fits in float32.

    Raises:
        DataValidationError: not 2-D, empty, not floating point, NaN / inf, an all-zero row, or values whose
            products cannot be represented; the message names ``name`` and the first bad row (0-based).
    """
    array = np.asarray(embeddings)
    if array.ndim != 2:
        raise DataValidationError(f"{name}: expected a 2-D array (n, dim), got shape {array.shape}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise DataValidationError(f"{name}: empty embedding matrix of shape {array.shape}")
    if not np.issubdtype(array.dtype, np.floating):
        raise DataValidationError(f"{name}: expected floating-point embeddings, got dtype {array.dtype}")
    n, dim = array.shape
    norms = row_norms(array)
    refuse_bad_rows(array, norms, name, normalize)
    if not normalize or not needs_normalizing(norms, name):
        return np.ascontiguousarray(array, dtype=np.float32)
    block = max(1, _CHECK_BLOCK_ELEMENTS // dim)
    result = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, block):
        rows = array[start : start + block].astype(np.float64)
        result[start : start + block] = rows / norms[start : start + block, None]
    return result


def row_norms(array: np.ndarray) -> np.ndarray:
    """float64 L2 norms of the rows, read in blocks (a memory-mapped input is never copied whole)."""
    n, dim = array.shape
    block = max(1, _CHECK_BLOCK_ELEMENTS // dim)
    norms = np.empty(n, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, n, block):
            rows = array[start : start + block].astype(np.float64)
            norms[start : start + block] = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    return norms


def needs_normalizing(norms: np.ndarray, name: str) -> bool:
    """Whether rows with these norms are normalized (all of them, or none: within _UNIT_TOLERANCE of unit length
    they are used as they are); warns once when some were off by more than _WARN_TOLERANCE."""
    off = np.abs(norms - 1.0)
    if off.max() <= _UNIT_TOLERANCE:
        return False
    not_unit = int((off > _WARN_TOLERANCE).sum())
    if not_unit:
        worst = int(off.argmax())
        logger.warning(
            "%s: %d of %d rows were not unit length (e.g. row %d has L2 norm %.4g); normalized them, as cosine "
            "similarity needs",
            name,
            not_unit,
            norms.size,
            worst,
            norms[worst],
        )
    return True


def refuse_bad_rows(array: np.ndarray, norms: np.ndarray, name: str, normalize: bool) -> None:
    """DataValidationError for the first row that cannot be used; ``norms`` are float64 row norms of ``array``."""
    bad = ~np.isfinite(norms)
    if bad.any():
        rows = np.flatnonzero(bad)
        row = int(rows[0])
        if np.isfinite(array[row]).all():
            reason = "values so large that their squares overflow even in float64"
        else:
            reason = "NaN or inf"
        raise DataValidationError(
            f"{name}: {rows.size} row(s) contain {reason} (first: row {row}, 0-based); "
            "check the encoder output or the .npy file"
        )
    if normalize:
        zero = np.flatnonzero(norms == 0)
        if zero.size:
            row = int(zero[0])
            what = (
                "is all zeros" if not array[row].any() else "has values too small to normalize (their squares are 0)"
            )
            raise DataValidationError(
                f"{name}: row {row} (0-based) {what} ({zero.size} such row(s)); a zero vector has no direction, so "
                "it has no cosine with anything"
            )
    else:
        # Without normalization an inner product is bounded by the product of the two norms; keep it within float32.
        large = np.flatnonzero(norms > _MAX_RAW_NORM)
        if large.size:
            raise DataValidationError(
                f"{name}: row {int(large[0])} (0-based) has L2 norm {norms[large[0]]:.3g}; inner products of such "
                "rows overflow float32 (normalize the rows)"
            )
