"""Did-you-mean: the known word a user probably meant, for every refusal that names a field, a
kind, an action or a command preemptd does not know."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["closest", "snake_case"]

_MAX_WORD = 64  # difflib is quadratic in a word's length, and an attacker chooses the words
_MAX_CANDIDATES = 1000
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_case(word: str) -> str:
    """`minAvailable` -> `min_available`: how the contract spells a field a Kubernetes user
    writes in camelCase."""
    return _CAMEL.sub("_", word).replace("-", "_").lower()


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word closest to `word` (case, `-`, `_` and camelCase aside), or None when
    nothing is close enough to be a misspelling of it."""
    if len(word) > _MAX_WORD:
        return None
    candidates = {snake_case(k): k for k, _ in zip(known, range(_MAX_CANDIDATES)) if len(k) <= _MAX_WORD}
    key = snake_case(word)
    if key in candidates:
        return candidates[key]
    cutoff = 0.75 if len(key) > 4 else 0.85  # `uid` is not a misspelt `id`
    match = difflib.get_close_matches(key, list(candidates), n=1, cutoff=cutoff)
    return candidates[match[0]] if match else None
