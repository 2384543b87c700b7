"""The limits of what a shim may send: every one a bound a real cluster never reaches, so that
no input can overflow the log, a snapshot or the decoder. An event beyond one is a dead letter
that names the limit and how far beyond it the event went. docs/contract.md lists them.
"""

from __future__ import annotations

import itertools
import re

__all__ = [
    "INT32",
    "MAX_DEPTH",
    "MAX_LABELS",
    "MAX_LABEL_KEY",
    "MAX_LABEL_VALUE",
    "MAX_MESSAGE_BYTES",
    "MAX_QUANTITY",
    "MAX_RESOURCE_NAME",
    "MAX_RESOURCE_NAMES",
    "MAX_TIMESTAMP",
    "MAX_TOTAL",
    "depth_beyond_limit",
]

#: A message on the cluster stream, in bytes (NATS's default `max_payload`).
MAX_MESSAGE_BYTES = 1 << 20
#: Objects and arrays inside one another in a message (a queue tree 30 levels deep fits).
MAX_DEPTH = 64
#: One quantity, in its resource's base unit (bytes, millicores, counts): 2^60, an exbibyte.
MAX_QUANTITY = 1 << 60
#: A sum of quantities the state keeps (a queue's usage, a partition's capacity): 2^62.
MAX_TOTAL = 1 << 62
#: Resource names in one map (`resources`, `capacity`, a guarantee), and the length of one.
MAX_RESOURCE_NAMES = 64
MAX_RESOURCE_NAME = 256
#: A node's labels, and the length of a label's key and value.
MAX_LABELS = 256
MAX_LABEL_KEY = 317  # Kubernetes: a 253-character prefix, `/`, a 63-character name
MAX_LABEL_VALUE = 1024
#: Milliseconds since the epoch (the year 287,396): exact in every JSON reader.
MAX_TIMESTAMP = (1 << 53) - 1
#: Priorities, as Kubernetes and YuniKorn hold them.
INT32 = (-(1 << 31), (1 << 31) - 1)

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string: brackets inside it do not nest
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [1 if chr(b) in "[{" else -1 for b in range(256)]  # read for brackets only


def depth_beyond_limit(raw: bytes) -> int | None:
    """How deep objects and arrays nest in the JSON `raw`, if deeper than `MAX_DEPTH`; else None.
    At once for the usual message, whose few brackets cannot nest that deep."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return None
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)  # all at C speed: a flood of deep
    deepest = max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)  # messages stays cheap
    return deepest if deepest > MAX_DEPTH else None
