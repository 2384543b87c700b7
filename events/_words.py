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
    if word.islower() or not any(c.isupper() for c in word):
        return word.replace("-", "_")
    return _CAMEL.sub("_", word).replace("-", "_").lower()


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word closest to `word` (case, `-`, `_` and camelCase aside), or None when
    nothing is close enough to be a misspelling of it."""
    if len(word) > _MAX_WORD:
        return None
    key = snake_case(word)
    cutoff = 0.75 if len(key) > 4 else 0.85  # `uid` is not a misspelt `id`
    # a word of length m can only be that close to one of length n when 2*min/(m+n) >= cutoff:
    # the others are left out before any comparison (a refusal may list a thousand names)
    shortest, longest = len(word) * cutoff / (2 - cutoff) - 2, len(word) * (2 - cutoff) / cutoff + 2
    candidates: dict[str, str] = {}
    for k, _ in zip(known, range(_MAX_CANDIDATES)):
        if shortest <= len(k) <= min(longest, _MAX_WORD):
            candidates.setdefault(snake_case(k), k)
    if key in candidates:
        return candidates[key]
    compared = list(candidates)
    if len(compared) > _COMPARED:  # difflib costs tens of microseconds a name: compare those sharing the most of its ends
        compared = sorted(compared, key=lambda name: (-_ends_shared(key, name), name))[:_COMPARED]
    match = difflib.get_close_matches(key, compared, n=1, cutoff=cutoff)
    return candidates[match[0]] if match else None


_COMPARED = 50


def _ends_shared(a: str, b: str) -> int:
    """How many characters `a` and `b` share at their start and at their end."""
    start = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    end = next((i for i, (x, y) in enumerate(zip(reversed(a), reversed(b))) if x != y), min(len(a), len(b)))
    return start + end
