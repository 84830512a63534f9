"""The one content hash of a list of texts (bitext_hf.data.hashing.text_sha256)."""

from __future__ import annotations

import hashlib

from bitext_hf.data.hashing import text_sha256
from bitext_hf.encoding.shards import text_sha256 as shards_text_sha256


def test_lines_hash_as_the_sha256sum_of_their_file():
    assert text_sha256(["Hello", "", "Grüße"]) == hashlib.sha256("Hello\n\nGrüße\n".encode()).hexdigest()
    assert text_sha256([]) == hashlib.sha256(b"").hexdigest()
    assert shards_text_sha256 is text_sha256


def test_texts_holding_line_breaks_never_collide():
    lists = [["a\nb"], ["a", "b"], ["a\n", "b"], ["a", "\nb"], ["a\nb", ""], ["a\n\nb"], ["", "a\nb"]]
    assert len({text_sha256(texts) for texts in lists}) == len(lists)
