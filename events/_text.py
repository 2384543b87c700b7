"""Text cut to a size: what a shim or a user sends may be of any size, and a refusal quotes it."""

from __future__ import annotations

__all__ = ["cut_text"]


def cut_text(text: str, chars: int) -> str:
    """`text` in at most `chars` characters, saying how many it left out."""
    return text if len(text) <= chars else f"{text[:chars]}... ({len(text) - chars:,} more characters)"
