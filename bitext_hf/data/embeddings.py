"""Precomputed sentence embeddings from ``.npy`` files, checked before any work: one line naming the file for an
empty, truncated, pickled, non-numeric or non-2-D array. Values are not normalized here
(``bitext_hf.mining.check_embeddings`` does that)."""

from __future__ import annotations

import contextlib
import io
import math
import os

import numpy as np

from bitext_hf.data.readers import display_name
from bitext_hf.errors import DataValidationError
from bitext_hf.io import compression_of, read_input_bytes

__all__ = ["read_embeddings"]

_NPY_MAGIC = b"\x93NUMPY"


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
