"""Text from data or file names shown on a terminal: every control character escaped, never sent raw.

A sentence, a column name or a file name may hold terminal escape sequences (``ESC [ 2 J`` clears the screen,
``ESC ] 52`` writes the clipboard, a C1 ``CSI`` does the same in one code point), a bell, a backspace or a carriage
return that overwrites what was printed, or bidirectional controls that reorder what the reader sees. What the
package prints of such text (a dry run's preview, a file name, an error message) goes through
:func:`escape_controls` first: the text stays readable and one line, and the terminal does nothing it was not asked
to.
"""

from __future__ import annotations

import re

__all__ = ["escape_controls"]

# C0 controls (tab and line breaks included), DEL, C1 controls; the line and paragraph separators; the bidirectional
# marks, embeddings, overrides and isolates (Unicode TR9), which reorder the characters around them. Joiners (ZWJ,
# ZWNJ) are left alone: Persian, Indic scripts and emoji need them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\x1b``, ``\\t``, ``\\u202e``) and any lone
    surrogate (a file name's undecodable byte, as ``os.fsdecode`` keeps it) as its byte (``\\xff``): safe to print,
    one line."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return _CONTROL.sub(_escape, text)
