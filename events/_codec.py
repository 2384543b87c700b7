"""Encoding and decoding of events, with errors a shim author can act on, and the JSON Schema.

Decoders are built once at import. A decode error names the event type and the field at fault,
in preemptd's own words: `task.submitted: an integer where a string is expected - at `$.app``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from ._cluster import ClusterEvent, Tick
from ._decisions import Blocked, DecisionEvent, Preempted
from ._errors import PreemptdError
from ._faults import first_fault
from ._limits import MAX_DEPTH, MAX_MESSAGE_BYTES, depth_beyond_limit
from ._quantity import QuantityError, Resources
from ._text import cut_text
from ._words import closest

__all__ = [
    "type_of",
    "CLUSTER_EVENT_TYPES",
    "DECISION_TYPES",
    "DecodeError",
    "LogEvent",
    "cut_text",
    "decode_cluster_event",
    "decode_decision",
    "decode_log_event",
    "encode",
    "encode_within",
    "json_schema",
    "to_builtins",
    "why_not",
]

LogEvent = ClusterEvent | Tick | DecisionEvent


class DecodeError(PreemptdError, ValueError):
    """Input that is not a valid event. `event_type` and `event_id` are the `type` and `id`
    fields when they could be read, so that a shim author can find the event."""

    def __init__(self, reason: str, event_type: str | None = None, event_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.event_type = event_type
        self.event_id = event_id


def _tag(member: type[msgspec.Struct]) -> str:
    """An event type's `type`: always a string here (msgspec also allows integer tags)."""
    tag = member.__struct_config__.tag
    assert isinstance(tag, str), member
    return tag


def _tags(union: Any) -> tuple[str, ...]:
    return tuple(_tag(member) for member in union.__args__)


CLUSTER_EVENT_TYPES = _tags(ClusterEvent)
DECISION_TYPES = _tags(DecisionEvent)
_TYPE_NAMES = {member: _tag(member) for member in (*ClusterEvent.__args__, Tick, *DecisionEvent.__args__)}


_BY_TYPE_NAME = {name: member for member, name in _TYPE_NAMES.items()}
_LOG_TYPES = (*CLUSTER_EVENT_TYPES, _tag(Tick), *DECISION_TYPES)


def type_of(event: msgspec.Struct) -> str:
    """The event's `type` (`task.submitted`, `decision.preempted`, ...)."""
    return _TYPE_NAMES[type(event)]


def _dec_hook(type_: type, obj: Any) -> Any:
    if type_ is Resources:
        try:
            return Resources.parse(obj)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
    raise NotImplementedError(f"no decoder for {type_!r}")


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Resources):
        return obj.to_wire()
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


# Annotated: msgspec's stubs type a decoder of a union (not a class) as decoding to Any.
_cluster_decoder: msgspec.json.Decoder[ClusterEvent] = msgspec.json.Decoder(ClusterEvent, dec_hook=_dec_hook)
_log_decoder: msgspec.json.Decoder[LogEvent] = msgspec.json.Decoder(LogEvent, dec_hook=_dec_hook)
_decision_decoder: msgspec.json.Decoder[DecisionEvent] = msgspec.json.Decoder(DecisionEvent, dec_hook=_dec_hook)
_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode(value: Any) -> bytes:
    """JSON bytes for an event, decision or any structure holding them."""
    return _encoder.encode(value)


def to_builtins(value: Any) -> Any:
    """Plain JSON data (dicts, lists, ...) for an event, exactly as it appears on the wire."""
    return msgspec.json.decode(_encoder.encode(value))


def _explain(exc: msgspec.DecodeError, raw: bytes, expected: tuple[str, ...]) -> DecodeError:
    """Why `raw` was refused, in preemptd's own words (never msgspec's, which change between its
    releases): only a refused message is read again to say it."""
    if not raw.strip():
        return DecodeError("empty message: expected a JSON object with a `type` field")
    try:
        document = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return _malformed(raw)
    if not isinstance(document, dict):
        return DecodeError(f"expected a JSON object with a `type` field, got a JSON {type(document).__name__}")
    event_id = document["id"] if isinstance(document.get("id"), str) else None
    event_type = document.get("type")
    if event_type is None:
        return DecodeError(f"missing field `type`; expected one of: {', '.join(expected)}", None, event_id)
    if not isinstance(event_type, str) or event_type not in expected:
        if event_type == Tick.__struct_config__.tag or event_type in DECISION_TYPES:
            return DecodeError(f"{event_type!r} is written by the daemon; shims may not publish it", str(event_type), event_id)
        near = closest(event_type, expected) if isinstance(event_type, str) else None
        return DecodeError(
            f"unknown event type {cut_text(repr(event_type), 80)} (did you mean {near}?)"
            if near
            else f"unknown event type {cut_text(repr(event_type), 80)}; expected one of: {', '.join(expected)}",
            event_type if isinstance(event_type, str) else None,
            event_id,
        )
    fault = first_fault(document, _BY_TYPE_NAME[event_type])
    if fault is None:  # a fault the walk does not know how to find: said as msgspec says it
        return DecodeError(f"{event_type}: {exc}", event_type, event_id)
    if fault.unknown is not None and fault.at == "$":
        return DecodeError(f"{event_type}: {_unknown_field(event_type, fault.unknown)}", event_type, event_id)
    return DecodeError(f"{event_type}: {fault}", event_type, event_id)


def _malformed(raw: bytes) -> DecodeError:
    """Why bytes are not JSON, with where: not UTF-8, or the first place a JSON reader stops."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as undecodable:
        return _not_utf8(undecodable)
    try:
        json.loads(text)
    except json.JSONDecodeError as stopped:
        return DecodeError(f"malformed JSON: {stopped.msg.lower()} at line {stopped.lineno}, column {stopped.colno}")
    except ValueError:  # a lone surrogate escaped in a string, say
        pass
    return DecodeError("malformed JSON: NaN, Infinity, numbers beyond a double or escaped lone surrogates are not JSON")


#: Words a Kubernetes user writes for fields the contract names otherwise (camelCase spellings
#: of the contract's own fields are found without this).
_KUBERNETES_WORDS = {
    "minMember": "min_available",
    "nodeName": "node",
    "requests": "resources",
    "allocatable": "capacity",
    "queueName": "queue",
    "unschedulable": "schedulable",
}


def _unknown_field(event_type: str, name: str) -> str:
    """Why a field of an event is refused: the field meant, else what the event has, and where
    a shim's own data goes."""
    shown = cut_text(name, 64)
    fields = [f.encode_name for f in msgspec.structs.fields(_TYPES[event_type])] if event_type in _TYPES else []
    meant = _KUBERNETES_WORDS.get(name) if _KUBERNETES_WORDS.get(name) in fields else closest(name, fields)
    if meant is not None:
        return f"unknown field `{shown}` (did you mean `{meant}`?)"
    listed = f"{event_type} has: {', '.join(f for f in fields if f != 'type')}; " if fields else ""
    return f"unknown field `{shown}` ({listed}a shim's own data goes in `annotations`)"


_TYPES: dict[str, type[msgspec.Struct]] = {_tag(member): member for member in (*ClusterEvent.__args__, Tick)}


def why_not(document: Any, root: type[msgspec.Struct], *, lax: bool = False) -> str:
    """Why `document` (data decoded from JSON or YAML) is not a `root`, in preemptd's own words:
    `unknown field `grace_perod` (did you mean `grace_period`?) - at `$.shim``. `lax`: as
    `msgspec.convert(..., strict=False)` reads it (strings for numbers and booleans)."""
    fault = first_fault(document, root, lax=lax)
    return str(fault) if fault is not None else f"not a {root.__name__}"


def decode_cluster_event(raw: bytes) -> ClusterEvent:
    """Decode what a shim published; raise `DecodeError` with an actionable reason. A message
    beyond the size or nesting limits is refused before it is parsed."""
    _check_limits(raw)
    try:
        return _cluster_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise _explain(exc, raw, CLUSTER_EVENT_TYPES) from None
    except UnicodeDecodeError as exc:
        raise _not_utf8(exc) from None


def _not_utf8(exc: UnicodeDecodeError) -> DecodeError:
    """msgspec's error for bytes in a string that are not UTF-8, as a reason."""
    return DecodeError(f"not UTF-8: byte {exc.object[exc.start : exc.start + 1]!r} in a string ({exc.reason}); messages are UTF-8 JSON")


# The `type` and `id` of a message too big or too deep to parse, so that a shim author can find it.
_PEEK = re.compile(rb'"(type|id)"\s*:\s*"([^"\\]{1,256})"')


def _check_limits(raw: bytes) -> None:
    if len(raw) > MAX_MESSAGE_BYTES:
        reason = f"message of {len(raw):,} bytes; the limit is {MAX_MESSAGE_BYTES:,} bytes"
    elif (depth := depth_beyond_limit(raw)) is not None:
        reason = f"objects and arrays nested {depth:,} levels deep; the limit is {MAX_DEPTH}"
    else:
        return
    seen = {key.decode(): value.decode(errors="replace") for key, value in _PEEK.findall(raw[:4096])}
    raise DecodeError(reason, seen.get("type"), seen.get("id"))


def decode_log_event(raw: bytes) -> LogEvent:
    """Decode any record of the log: a cluster event, a tick or a decision. An event an
    earlier version took with fields it did not know (it dropped them) is read as it was then."""
    try:
        return _log_decoder.decode(raw)
    except msgspec.DecodeError as exc:  # a ValidationError too
        if isinstance(exc, msgspec.ValidationError) and _first_fault_is_an_unknown_field(raw):
            known = _known_fields_only(raw)
            try:
                return _log_decoder.decode(known)
            except msgspec.DecodeError as again:  # wrong in a field it knows as well
                raise _explain(again, known, _LOG_TYPES) from None
        raise _explain(exc, raw, _LOG_TYPES) from None


def _first_fault_is_an_unknown_field(raw: bytes) -> bool:
    document = msgspec.json.decode(raw)
    fault = first_fault(document, _BY_TYPE_NAME[document["type"]])
    return fault is not None and fault.unknown is not None


def _known_fields_only(raw: bytes) -> bytes:
    document = msgspec.json.decode(raw)
    known = {f.encode_name for f in msgspec.structs.fields(_BY_TYPE_NAME[document["type"]])} | {"type"}
    return msgspec.json.encode({key: value for key, value in document.items() if key in known})


def decode_decision(raw: bytes) -> DecisionEvent:
    try:
        return _decision_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise _explain(exc, raw, DECISION_TYPES) from None


# How far `encode_within` cuts, step by step: lines kept per list, characters kept per line.
_CUTS = ((200, 2000), (50, 1000), (20, 400), (5, 200), (1, 100))


def encode_within(decision: DecisionEvent, max_bytes: int) -> bytes | None:
    """The decision's JSON in at most `max_bytes`: the whole if it fits, else with its
    explanation, its victims' whys and its blocked reasons cut, each cut saying what it left out
    (the whole decision stays in the log: `preemptd explain <id>`); None if nothing fits."""
    data = encode(decision)
    for lines, chars in _CUTS:
        if len(data) <= max_bytes:
            return data
        data = encode(_cut(decision, lines, chars))
    return data if len(data) <= max_bytes else None


def _cut(decision: DecisionEvent, lines: int, chars: int) -> DecisionEvent:
    changes: dict[str, Any] = {"explanation": _cut_lines(decision.explanation, lines, chars, decision.id)}
    if isinstance(decision, Blocked):
        changes["reasons"] = _cut_lines(decision.reasons, lines, chars, decision.id)
    if isinstance(decision, Preempted):
        changes["victims"] = tuple(msgspec.structs.replace(v, why=cut_text(v.why, chars)) for v in decision.victims)
    return msgspec.structs.replace(decision, **changes)


def _cut_lines(texts: tuple[str, ...], lines: int, chars: int, decision_id: str) -> tuple[str, ...]:
    kept = tuple(cut_text(text, chars) for text in texts[:lines])
    if len(texts) > lines:
        kept += (f"... {len(texts) - lines:,} more lines: preemptd explain {decision_id}",)
    return kept


_QUANTITY_SCHEMA = {
    "description": 'Kubernetes quantity: 4, 1.5, "500m", "2Gi", "1e3"',
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\+?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE])?$"},
    ],
}


def _schema_hook(type_: type) -> dict[str, Any]:
    if type_ is Resources:
        return {
            "type": "object",
            "description": "resource name (cpu, memory, nvidia.com/gpu, vcore, ...) to quantity",
            "additionalProperties": _QUANTITY_SCHEMA,
        }
    raise NotImplementedError


def _without_discriminator(schema: dict[str, Any]) -> dict[str, Any]:
    """msgspec marks a tagged union with OpenAPI's `discriminator`, which JSON Schema does not
    have (ajv's strict mode refuses it); each member's `type` is a `const` already."""
    schema.pop("discriminator", None)
    return schema


def json_schema(kind: str = "cluster", models: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON Schema of cluster events (`cluster`) or decisions (`decisions`); `models`, the
    names `config.applied` may give (the contract itself does not fix them)."""
    union = {"cluster": ClusterEvent, "decisions": DecisionEvent}[kind]
    schema = _without_discriminator(msgspec.json.schema(union, schema_hook=_schema_hook))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    config = schema["$defs"].get("ConfigApplied")
    if config is not None and models:
        config["properties"]["model"]["enum"] = list(models)
    return schema
