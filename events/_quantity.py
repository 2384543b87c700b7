"""Kubernetes quantities as exact integers, and the `Resources` value that carries them.

On the wire a quantity is Kubernetes notation (`"500m"`, `"2Gi"`, `"1.5"`, `4`). Inside preemptd
it is an exact integer in the resource's canonical unit: millicores for `cpu` and `vcore`,
plain units (bytes, counts) for everything else. Encoding writes the shortest notation that
decodes back to the same integer, so an encoded event always re-decodes to an equal event.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal

from ._errors import PreemptdError
from ._limits import MAX_QUANTITY, MAX_RESOURCE_NAME, MAX_RESOURCE_NAMES
from ._text import cut_text

__all__ = ["MILLI_RESOURCES", "QuantityError", "Resources", "base_unit", "format_human", "parse_quantity"]

#: Resources counted in thousandths: a quantity of 1 is stored as 1000.
MILLI_RESOURCES = frozenset({"cpu", "vcore"})

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_NOTATION = re.compile(
    r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exponent>[+-]?\d+)|(?P<decimal>[numkMGTPE]?))$"
)


class QuantityError(PreemptdError, ValueError):
    """A quantity that is not valid Kubernetes notation, negative, or finer than its unit."""


def _unit(resource: str) -> int:
    return 1000 if resource in MILLI_RESOURCES else 1


def _as_decimal(text: str) -> Decimal:
    match = _NOTATION.match(text.strip())
    if match is None:
        raise QuantityError(f'{text!r} is not a quantity (examples: 4, "1.5", "500m", "2Gi", "1e3")')
    number = Decimal(match["number"])
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"] is not None:
        if not number:  # zero, whatever its exponent
            return number
        if len(match["exponent"].lstrip("+-").lstrip("0")) > 4:  # 1e10000 and beyond: out of range whatever the digits (the decimal module would overflow)
            beyond = "above the limit, 2^60 in its unit" if not match["exponent"].startswith("-") else "finer than any unit"
            raise QuantityError(f"{cut_text(repr(text), 72)} is {beyond}")
        return number.scaleb(int(match["exponent"]))
    return number * _DECIMAL[match["decimal"] or ""]


def parse_quantity(resource: str, value: object) -> int:
    """Return `value` for `resource` as an exact non-negative integer in canonical units."""
    if type(value) is int and 0 <= value * _unit(resource) <= MAX_QUANTITY:  # the common case, without Decimal
        return value * _unit(resource)
    if type(value) is str and len(value) <= 64:  # shims repeat the same few quantities: parse each once (short ones: the cache holds 4,096)
        return _parse_text(resource, value)
    return _parse(resource, value)


@functools.lru_cache(maxsize=4096)
def _parse_text(resource: str, value: str) -> int:
    return _parse(resource, value)


def _parse(resource: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise QuantityError(f"{resource}: expected a number or a quantity string, got {value!r}")
    try:
        amount = _as_decimal(str(value)) * _unit(resource)
        whole = amount == amount.to_integral_value()
    except QuantityError as exc:
        raise QuantityError(f"{resource}: {exc}") from None
    except ArithmeticError:  # the decimal module's overflow or invalid operation: never past here
        raise QuantityError(f"{resource}: {cut_text(repr(value), 72)} is out of range (quantities are integers from 0 to 2^60)") from None
    if amount < 0:
        raise QuantityError(f"{resource}: {value!r} is negative; quantities must be >= 0")
    if not whole:
        finest = "1m" if resource in MILLI_RESOURCES else "1"
        raise QuantityError(f"{resource}: {value!r} is finer than the smallest unit ({finest})")
    if amount > MAX_QUANTITY:
        unit = "millicores" if resource in MILLI_RESOURCES else "units (bytes, counts)"
        shown = f"{amount:,.0f}" if amount < 10**24 else f"{amount:.3e}"
        raise QuantityError(f"{resource}: {value!r} is {shown} {unit}; the limit is {MAX_QUANTITY:,} (2^60)")
    return int(amount)


def format_wire(resource: str, amount: int) -> int | str:
    """The shortest notation that `parse_quantity(resource, ...)` maps back to `amount`."""
    unit = _unit(resource)
    if amount % unit == 0:
        return amount // unit
    return f"{amount}m"


#: Resources counted in bytes (besides `hugepages-<size>`): shown in binary units. Any other
#: resource is a count (pods, GPUs), shown as a plain number.
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})
_DECIMAL_FACTORS = tuple((suffix, int(_DECIMAL[suffix])) for suffix in "EPTGMk")  # largest first


def format_human(resource: str, amount: int) -> str:
    """A compact display form: cores (`1.5`), millicores below one core (`500m`), bytes in
    binary units (`2Gi`, `1536Mi`), counts as they are (`3` pods, `1024` GPUs)."""
    if resource in MILLI_RESOURCES:
        if amount < 1000:
            return f"{amount}m" if amount else "0"
        return str(Decimal(amount) / 1000).rstrip("0").rstrip(".") if amount % 1000 else str(amount // 1000)
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        return _bytes_human(amount)
    return str(amount)


def _bytes_human(amount: int) -> str:
    """`2Gi`; exactly in the decimal notation a shim may have used (`1G`) when no binary unit
    divides it; else about so much (`~1.15Gi`), never a raw count of bytes past 1Ki."""
    if amount < 1024:
        return str(amount)
    for suffix, factor in reversed(_BINARY.items()):
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    for suffix, factor in _DECIMAL_FACTORS:
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    suffix, factor = next((s, f) for s, f in reversed(_BINARY.items()) if amount >= f)
    about = amount / factor  # 1 <= about < 1024
    return f"~{about:.3g}{suffix}" if about < 999.5 else f"~{about:.0f}{suffix}"


class Resources(Mapping[str, int]):
    """An immutable map of resource name to canonical integer amount.

    `amounts` is the plain dict underneath, for arithmetic on hot paths. Names are kept in
    sorted order so that equal resources encode to equal bytes.
    """

    __slots__ = ("amounts",)
    amounts: dict[str, int]

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        object.__setattr__(self, "amounts", dict(sorted((amounts or {}).items())))

    @classmethod
    def parse(cls, raw: object) -> Resources:
        """Resources from wire notation: `{"cpu": "500m", "memory": "2Gi"}`."""
        if not isinstance(raw, dict):
            raise QuantityError(f"expected an object of resource name to quantity, got {raw!r}"[:300])
        if len(raw) > MAX_RESOURCE_NAMES:
            raise QuantityError(f"{len(raw):,} resource names; the limit is {MAX_RESOURCE_NAMES}")
        parsed = {}
        for name in sorted(raw):
            if not isinstance(name, str) or not name:
                raise QuantityError(f"resource names must be non-empty strings, got {name!r}")
            if len(name) > MAX_RESOURCE_NAME:
                raise QuantityError(f"a resource name of {len(name):,} characters; the limit is {MAX_RESOURCE_NAME}")
            parsed[name] = parse_quantity(name, raw[name])
        resources = cls.__new__(cls)  # already in order: skip the sort in __init__
        object.__setattr__(resources, "amounts", parsed)
        return resources

    def to_wire(self) -> dict[str, int | str]:
        return {name: format_wire(name, amount) for name, amount in self.amounts.items()}

    def __getitem__(self, name: str) -> int:
        return self.amounts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.amounts)

    def __len__(self) -> int:
        return len(self.amounts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self.amounts == other.amounts
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self.amounts.items()))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Resources is immutable")

    def __repr__(self) -> str:
        return f"Resources({self.amounts!r})"

    def __str__(self) -> str:
        return ", ".join(f"{n} {format_human(n, a)}" for n, a in self.amounts.items()) or "nothing"


def base_unit(resource: str, amount: int) -> float:
    """An amount in the unit people chart and alert in: cores, not millicores; bytes, counts."""
    return amount / 1000 if resource in MILLI_RESOURCES else float(amount)
