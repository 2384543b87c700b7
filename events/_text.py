"""Text from shims, made safe to show: cut to a size (what a shim or a user sends may be of any
size, and a refusal quotes it), and with what could act on a terminal escaped."""

from __future__ import annotations

import reprlib
import unicodedata
from typing import Any

__all__ = ["cut_text", "printable", "printable_lines", "shown"]

# Controls (C0, DEL, C1), format characters (bidirectional overrides and isolates, zero-width
# characters) and line and paragraph separators: shown as escapes, never sent to the terminal.
_UNSAFE = {"Cc", "Cf", "Zl", "Zp"}


def printable(text: str) -> str:
    """`text` with every character that could act on a terminal escaped (`\x1b`, `\u202e`)."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) in _UNSAFE else ch for ch in text)


def printable_lines(text: str) -> str:
    """`text` made printable line by line: its own line breaks kept."""
    return "\n".join(map(printable, text.split("\n")))


def cut_text(text: str, chars: int) -> str:
    """`text` in at most `chars` characters (at least 40), saying how many it left out; so
    cutting what was cut changes nothing (a decision's reasons, cut when made, compare equal to
    the same reasons cut again: a blocked task is not told them again every cycle)."""
    if len(text) <= chars:
        return text
    left_out = len(text) - chars
    while True:  # the note's length depends on the count it gives: at most a few rounds
        note = f"... ({left_out:,} more characters)"
        kept = max(chars - len(note), 0)
        if len(text) - kept == left_out:
            return text[:kept] + note
        left_out = len(text) - kept


def shown(value: Any) -> str:
    """A value a refusal quotes, cut short: what a shim sent may be of any size (the repr is
    bounded as it is made, not after: a value may hold millions of items)."""
    return cut_text(_SHORT_REPR.repr(value), 80)


def _short_repr() -> reprlib.Repr:
    bounded = reprlib.Repr()  # Python 3.11's takes no settings as arguments
    bounded.maxlevel, bounded.maxlist, bounded.maxtuple, bounded.maxdict, bounded.maxset = 3, 6, 6, 6, 6
    bounded.maxstring, bounded.maxother, bounded.maxlong = 80, 80, 40
    return bounded


_SHORT_REPR = _short_repr()
