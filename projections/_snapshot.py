"""Snapshots: the whole cluster state as bytes, restored exactly.

msgpack through msgspec: the state is made of Structs, dicts and lists, so encoding is one call.
Dict order survives the round trip, which keeps every later iteration identical to the live one.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events import Resources
from projections._state import ClusterState

__all__ = ["restore", "snapshot"]


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Resources):
        return obj.amounts
    raise NotImplementedError(f"cannot snapshot {type(obj).__name__}")


def _dec_hook(type_: type, obj: Any) -> Any:
    if type_ is Resources:
        return Resources(obj)
    raise NotImplementedError(f"cannot restore {type_!r}")


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_decoder = msgspec.msgpack.Decoder(ClusterState, dec_hook=_dec_hook)


def snapshot(state: ClusterState) -> bytes:
    return _encoder.encode(state)


def restore(data: bytes) -> ClusterState:
    return _decoder.decode(data)
