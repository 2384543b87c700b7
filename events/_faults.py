"""Why a document is not a value of a type, in preemptd's own words.

msgspec refuses a document with a message of its own wording, which changes between releases (a
shim's dead-letter reason changed with msgspec 0.23). The refusal's reason is made here instead:
the decoded document is walked against the type's description (`msgspec.inspect`) and the first
fault in document order is said, with the path to it. Only a refused message is walked.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import msgspec.inspect as mi

from ._text import cut_text, shown
from ._words import closest

__all__ = ["Fault", "first_fault"]


@dataclass(frozen=True, slots=True)
class Fault:
    """The first thing wrong in a document: where (`$.shim.grace_period`, `$` for the whole),
    and why. `unknown` is the name of a field the type does not have, when that is the fault;
    `fields` then lists the fields the type has there."""

    at: str
    why: str
    unknown: str | None = None
    fields: tuple[str, ...] = ()
    mismatch: bool = False  # a value of another kind than expected (not a fault inside it)

    def __str__(self) -> str:
        return self.why if self.at == "$" else f"{self.why} - at `{self.at}`"


def first_fault(document: Any, type_: Any, *, lax: bool = False) -> Fault | None:
    """The first fault of `document` (JSON or YAML data) as a `type_`, or None when none is
    found. `lax`: strings may stand for numbers and booleans (msgspec's `strict=False`)."""
    return _fault(document, _info(type_), "$", lax)


@cache
def _info(type_: Any) -> mi.Type:
    return mi.type_info(type_)


_NAMES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer", float: "a number", type(None): "null"}


def _kind(value: Any) -> str:
    return _NAMES.get(type(value), type(value).__name__)


def _mismatch(value: Any, expected: str, at: str) -> Fault:
    return Fault(at, f"{_kind(value)} where {expected} is expected", mismatch=True)


def _fault(value: Any, info: mi.Type, at: str, lax: bool) -> Fault | None:  # noqa: C901 - one case per kind of type
    if isinstance(info, mi.Metadata):
        return _fault(value, info.type, at, lax)
    if isinstance(info, mi.AnyType):
        return None
    if isinstance(info, mi.UnionType):
        return _union_fault(value, info, at, lax)
    if isinstance(info, mi.StructType):
        return _struct_fault(value, info, at, lax)
    if isinstance(info, mi.DictType):
        return _dict_fault(value, info, at, lax)
    if isinstance(info, (mi.ListType, mi.TupleType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
        return _list_fault(value, info, at, lax)
    if isinstance(info, mi.StrType):
        return _str_fault(value, info, at)
    if isinstance(info, mi.BoolType):
        if isinstance(value, bool) or (lax and isinstance(value, str) and value.lower() in ("true", "false", "1", "0")):
            return None
        if lax and isinstance(value, str):
            return Fault(at, f"{shown(value)} where true or false is expected")
        return _mismatch(value, "true or false", at)
    if isinstance(info, (mi.IntType, mi.FloatType)):
        return _number_fault(value, info, at, lax)
    if isinstance(info, mi.NoneType):
        return None if value is None else _mismatch(value, "null", at)
    if isinstance(info, mi.LiteralType):
        return _literal_fault(value, info, at)
    if isinstance(info, mi.CustomType):
        return _custom_fault(value, info, at)
    return None  # a kind of type the contract does not use: msgspec's refusal stands


def _struct_fault(value: Any, info: mi.StructType, at: str, lax: bool) -> Fault | None:
    if not isinstance(value, dict):
        return _mismatch(value, "an object", at)
    fields = {f.encode_name: f for f in info.fields}
    for key, item in value.items():
        if key == info.tag_field:
            continue
        field = fields.get(key)
        if field is None:
            if info.forbid_unknown_fields:
                return Fault(at, _unknown_field_why(str(key), fields), unknown=str(key), fields=tuple(fields))
            continue
        if (fault := _fault(item, field.type, f"{at}.{key}", lax)) is not None:
            return fault
    missing = [name for name, field in fields.items() if field.required and name not in value]
    if missing:
        return Fault(at, f"missing field `{missing[0]}`")
    return None


def _unknown_field_why(name: str, fields: dict[str, Any]) -> str:
    near = closest(name, list(fields))
    said = f"unknown field `{cut_text(name, 64)}`"
    return f"{said} (did you mean `{near}`?)" if near else said


def _dict_fault(value: Any, info: mi.DictType, at: str, lax: bool) -> Fault | None:
    if not isinstance(value, dict):
        return _mismatch(value, "an object", at)
    if (fault := _count_fault(len(value), info, at, "entries")) is not None:
        return fault
    for key, item in value.items():
        if (fault := _fault(key, info.key_type, at, lax)) is not None:
            return Fault(at, f"the key {shown(key)}: {fault.why}")
        if (fault := _fault(item, info.value_type, f"{at}[{shown(key)}]", lax)) is not None:
            return fault
    return None


def _list_fault(value: Any, info: Any, at: str, lax: bool) -> Fault | None:
    if not isinstance(value, list):
        return _mismatch(value, "an array", at)
    if isinstance(info, mi.TupleType):
        if len(value) != len(info.item_types):
            return Fault(at, f"an array of {len(value):,} items where {len(info.item_types)} are expected")
        item_types = list(info.item_types)
    else:
        if (fault := _count_fault(len(value), info, at, "items")) is not None:
            return fault
        item_types = [info.item_type] * len(value)
    for i, (item, item_info) in enumerate(zip(value, item_types)):
        if (fault := _fault(item, item_info, f"{at}[{i}]", lax)) is not None:
            return fault
    return None


def _count_fault(count: int, info: Any, at: str, things: str) -> Fault | None:
    if info.max_length is not None and count > info.max_length:
        return Fault(at, f"{count:,} {things}; the limit is {info.max_length:,}")
    if info.min_length is not None and count < info.min_length:
        return Fault(at, f"{count:,} {things}; at least {info.min_length:,} are needed")
    return None


def _str_fault(value: Any, info: mi.StrType, at: str) -> Fault | None:
    if not isinstance(value, str):
        return _mismatch(value, "a string", at)
    if info.max_length is not None and len(value) > info.max_length:
        return Fault(at, f"a string of {len(value):,} characters; the limit is {info.max_length:,}")
    if info.min_length is not None and len(value) < info.min_length:
        return Fault(at, "an empty string" if not value else f"a string of {len(value):,} characters; at least {info.min_length:,} are needed")
    if info.pattern is not None and not _pattern(info.pattern).search(value):
        return Fault(at, f"{shown(value)} does not match {info.pattern}")
    return None


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _number_fault(value: Any, info: mi.IntType | mi.FloatType, at: str, lax: bool) -> Fault | None:
    integral = isinstance(info, mi.IntType)
    wanted = "an integer" if integral else "a number"
    if lax and isinstance(value, str):
        try:
            value = int(value) if integral else float(value)
        except ValueError:
            return Fault(at, f"{shown(value)} where {wanted} is expected")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integral and not isinstance(value, int)):
        return _mismatch(value, wanted, at)
    if isinstance(value, float) and not math.isfinite(value):
        return Fault(at, f"{value} where a finite number is expected")
    if info.le is not None and value > info.le:
        return Fault(at, f"{value:,} is beyond the limit of {info.le:,}")
    if info.lt is not None and value >= info.lt:
        return Fault(at, f"{value:,}; it must be below {info.lt:,}")
    if info.ge is not None and value < info.ge:
        return Fault(at, f"{value:,} is below the least allowed, {info.ge:,}")
    if info.gt is not None and value <= info.gt:
        return Fault(at, f"{value:,}; it must be above {info.gt:,}")
    if info.multiple_of is not None and value % info.multiple_of:
        return Fault(at, f"{value:,} is not a multiple of {info.multiple_of:,}")
    return None


def _literal_fault(value: Any, info: mi.LiteralType, at: str) -> Fault | None:
    if value in info.values and type(value) in {type(v) for v in info.values}:
        return None
    words = [str(v) for v in info.values]
    near = closest(value, words) if isinstance(value, str) else None
    hint = f" (did you mean {near}?)" if near else f"; expected one of: {', '.join(words)}"
    return Fault(at, f"{shown(value)} is not a known value{hint}")


def _custom_fault(value: Any, info: mi.CustomType, at: str) -> Fault | None:
    """A type decoded by a hook (resource maps): its parser says why."""
    parse = getattr(info.cls, "parse", None)
    if parse is None:
        return None
    try:
        parse(value)
    except (ValueError, TypeError) as refused:  # QuantityError is a ValueError
        return Fault(at, str(refused))
    return None


def _union_fault(value: Any, info: mi.UnionType, at: str, lax: bool) -> Fault | None:
    """Fine when one member takes the value; else the fault under the member of the value's
    own kind (an object against the object member), or else what was expected."""
    faults = [_fault(value, member, at, lax) for member in info.types]
    if any(fault is None for fault in faults):
        return None
    inside = [fault for fault in faults if fault is not None and not fault.mismatch]
    if inside:
        return inside[0]
    return _mismatch(value, " or ".join(sorted({_expected(member) for member in info.types})), at)


def _expected(info: mi.Type) -> str:
    while isinstance(info, mi.Metadata):
        info = info.type
    by_type = {
        mi.StrType: "a string",
        mi.IntType: "an integer",
        mi.FloatType: "a number",
        mi.BoolType: "a boolean",
        mi.NoneType: "null",
        mi.DictType: "an object",
        mi.StructType: "an object",
        mi.ListType: "an array",
        mi.LiteralType: "a known value",
    }
    return by_type.get(type(info), "a value of another kind")
