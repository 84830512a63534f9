"""The content hash of a list of texts: the one identity that shard manifests, the encoding cache (the CLI's and the
LASER3 teacher's) and the word-alignment cache give a text, so that they agree on what "the same text" means."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

__all__ = ["text_sha256"]

# Never a byte of UTF-8, so it cannot begin a text written as its bytes and a line break.
_LENGTH_PREFIXED = b"\xff"


def text_sha256(texts: Sequence[str]) -> str:
    """SHA-256 of the texts (hex), one to one: no two lists share a digest.

    Each text is hashed as its UTF-8 bytes followed by ``\\n``, so for the lines of a file with LF line ends the
    digest is the ``sha256sum`` of that file. A text that holds a ``\\n`` itself would make that ambiguous (``["a\\nb"]``
    against ``["a", "b"]``), so it is hashed instead as a 0xFF byte, its byte length (8 bytes, little-endian) and its
    bytes.
    """
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8")
        if b"\n" in encoded:
            digest.update(_LENGTH_PREFIXED + len(encoded).to_bytes(8, "little"))
            digest.update(encoded)
        else:
            digest.update(encoded)
            digest.update(b"\n")
    return digest.hexdigest()
