"""Snapshots: the whole cluster state as bytes, restored exactly.

msgpack through msgspec: the state is made of Structs, dicts and lists, so encoding is one call.
Dict order survives the round trip, which keeps every later iteration identical to the live one.
A snapshot starts with its format number: one written by a version with another state layout is
refused (`SnapshotError`) rather than misread, and the caller folds the log instead.

Inside, a snapshot names the layout of the models' own state types (`Projection.layout`): one
taken while a model kept its state in another shape is refused too. A model's parts of the state
come back as plain data; `Projection.restore` makes them the model's own again.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec

from preemptd.events import PreemptdError, Resources

from ._state import ClusterState, Kept

__all__ = ["SNAPSHOT_FORMAT", "SnapshotError", "decode_snapshot", "encode_snapshot"]

# Bump when ClusterState's layout changes (2: models hold their own parts; 3: an absent
# min_available is None, not 0; 4: Kueue's admissions in its model state; 5: a queue counts its
# pending tasks, a preemptor's victims are a tuple).
SNAPSHOT_FORMAT = 5


class SnapshotError(PreemptdError, ValueError):
    """A snapshot this version cannot restore."""


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Resources):
        return obj.amounts
    if isinstance(obj, Kept):
        return None  # made again after a restore
    raise NotImplementedError(f"cannot snapshot {type(obj).__name__}")


def _dec_hook(type_: type, obj: Any) -> Any:
    if type_ is Resources:
        return Resources(obj)
    if type_ is Kept:
        return Kept()
    raise NotImplementedError(f"cannot restore {type_!r}")


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_header_decoder = msgspec.msgpack.Decoder(tuple[int, msgspec.Raw])
_body_decoder = msgspec.msgpack.Decoder(tuple[str, msgspec.Raw])
_decoder = msgspec.msgpack.Decoder(ClusterState, dec_hook=_dec_hook)


def encode_snapshot(state: ClusterState, layout: str) -> bytearray:
    """`state` as bytes; `layout` names the shape of the models' own states. Encoded into one
    buffer after its headers: wrapping the encoded state twice copied it twice, and a state of
    100,000 tasks is tens of megabytes."""
    headers = _encoder.encode((SNAPSHOT_FORMAT, msgspec.Raw(_encoder.encode((layout, msgspec.Raw(b""))))))
    buffer = bytearray(headers)
    _encoder.encode_into(state, buffer, len(headers))
    return buffer


def decode_snapshot(data: bytes, layout: str, earlier: Collection[str] = ()) -> tuple[ClusterState, str]:
    """The state in a snapshot taken with the same `layout`, or one of the `earlier` layouts
    this version still reads, the models' parts as plain data; and the layout it was taken with."""
    try:
        version, body = _header_decoder.decode(data)
        if version != SNAPSHOT_FORMAT:
            raise SnapshotError(f"snapshot format {version}; this version reads format {SNAPSHOT_FORMAT}")
        taken, state = _body_decoder.decode(body)
        if taken != layout and taken not in earlier:
            raise SnapshotError("snapshot of models whose state had another shape")
        return _decoder.decode(state), taken
    except msgspec.DecodeError as exc:
        raise SnapshotError(f"unreadable snapshot: {exc}") from None
