"""What a model shows of a partition, in its users' words (`Views`, one per model): the line
that says what runs, `preemptd state`'s columns and tables, and the curves and shares the
report draws over time and the metrics gauge. Read by the CLI, the report and the metrics;
nothing here decides or folds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from preemptd.events import base_unit
from preemptd.projections import PartitionState

from ._explain import counted

__all__ = ["QUEUE_CURVES", "Column", "Curve", "CurveKind", "Curves", "Table", "Views", "curve_unit"]


def describe_queues(partition: PartitionState) -> str:
    """`Model.describe` of a model with nothing to say beyond its queues."""
    return f"{partition.model}: {counted(len(partition.queues), 'queue')}"


#: A column of `preemptd state` in the model's own terms: its name (the JSON key; the text
#: table heads it in capitals, `_` as a space) and per queue its value: amounts (a resource
#: dict), a number, a share (a Fraction), text, or None (nothing to say).
Column = tuple[str, dict[str, Any]]


#: A table `preemptd state` shows below the queues: its name (the JSON key) and its rows, each a
#: dict of column name to value (amounts, a number or text), in order.
Table = tuple[str, list[dict[str, Any]]]


def no_tables(partition: PartitionState) -> list[Table]:
    """`Model.tables` of a model with nothing to show beyond its queues."""
    return []


#: How the report draws a curve (see `Curve`).
CurveKind = Literal["held", "asked", "bound"]


@dataclass(frozen=True)
class Curve:
    """One amount the report draws for each queue over time (and the metrics show as a gauge),
    in its model's terms: `name` (its key in `Curves`, the gauge's `preemptd_queue_<name>`),
    `words` (what the model's users call it: the legend, the summary) and `kind`:

    - "held": an area, what the queue holds (allocated; Kueue's quota reserved by admission);
    - "asked": a band stacked on the held curve named `on`, so that neither hides the other;
    - "bound": a line, a guarantee or limit (none where the queue has none).

    The summary's "longest under ..." measures the `on` of the asked curve against the first
    bound."""

    name: str
    words: str
    kind: CurveKind
    on: str = ""


#: The report's curves of a model whose queues hold what they allocate against their
#: guaranteed and max.
QUEUE_CURVES = (
    Curve("allocated", "allocated", "held"),
    Curve("pending", "pending", "asked", on="allocated"),
    Curve("guaranteed", "guaranteed", "bound"),
    Curve("max", "max", "bound"),
)


#: What a model gives the report for one moment: per queue path, per curve name, the amounts
#: by resource (no entry: the curve has no value there; "allocated" and "pending", when not
#: given, are the queue's own). A resource may be named with where it is held, as
#: "<resource> in <where>" (Kueue's "cpu in spot"): one chart each, in the resource's unit.
Curves = dict[str, dict[str, dict[str, int]]]


def curve_unit(key: str, amount: int) -> float:
    """An amount of a `Curves` resource key in the unit people chart in (`base_unit`)."""
    return base_unit(key.split(" in ", 1)[0], amount)


def queue_curves(partition: PartitionState) -> Curves:
    """`Model.curves` of a model whose queues carry their guarantee and max themselves."""
    return {path: {"guaranteed": queue.guaranteed, **({"max": queue.max} if queue.max is not None else {})} for path, queue in partition.queues.items()}


def no_shares(partition: PartitionState) -> dict[str, float]:
    """`Model.shares` of a model that orders queues by no share."""
    return {}


def bound_columns(partition: PartitionState) -> list[Column]:
    """`Model.queue_columns` of a model whose queues carry their guarantee and max themselves."""
    return [
        ("guaranteed", {path: queue.guaranteed or None for path, queue in partition.queues.items()}),
        ("max", {path: queue.max for path, queue in partition.queues.items()}),
    ]


@dataclass(frozen=True)
class Views:
    """What a model shows of a partition, in its users' words.

    - `describe(partition)`: what runs, in one line: the model and what is on (for the log,
      `state`, the report and `explain` of a configuration change), saying plainly when the
      configuration can preempt nothing.
    - `queue_columns(partition)`: what `preemptd state` shows of each queue beside its usage
      (`Column`s: YuniKorn's guaranteed and max, Kueue's cohort, nominal quota, limits and
      admitted usage, Volcano's weight, deserved, capability and share); the text table and
      `--json` show the same.
    - `usage_words`: what `preemptd state` heads a queue's usage columns, where the model's
      words differ from preemptd's (`preempting`: Kueue's workloads are evicting, Volcano's
      tasks releasing).
    - `tables(partition)`: what `preemptd state` shows below the queues (Kueue's cohorts and
      workloads, Volcano's jobs with their gangs).
    - `curve_words`: the amounts the report draws of each queue and the metrics gauge (`Curve`:
      YuniKorn's allocated, pending, guaranteed and max; Kueue's admitted and running against
      nominal quota and borrowing limit; Volcano's deserved, guarantee and capability), and
      `curves(partition)` those amounts now, per queue (`Curves`).
    - `shares(partition)`: per queue (and cohort), the share the model orders them by now
      (Volcano's allocated over deserved, Kueue's weighted share under fair sharing), drawn
      over time in the report under `share_words`; none when the model orders by none.
    """

    describe: Callable[[PartitionState], str] = describe_queues
    queue_columns: Callable[[PartitionState], list[Column]] = bound_columns
    usage_words: Mapping[str, str] = field(default_factory=dict)
    tables: Callable[[PartitionState], list[Table]] = no_tables
    curve_words: tuple[Curve, ...] = QUEUE_CURVES
    curves: Callable[[PartitionState], Curves] = queue_curves
    shares: Callable[[PartitionState], dict[str, float]] = no_shares
    share_words: str = ""
