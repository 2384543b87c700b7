"""Text for people: one-line decision summaries (`tail`), full explanations (`explain`), the
queue table (`state`) and replay reports.

Names, reasons and payloads come from shims: everything shown passes through `printable`, so
that no control character, escape sequence or bidirectional override reaches the terminal raw.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import msgspec

from preemptd.events import (
    Admitted,
    Allocated,
    Blocked,
    ConfigApplied,
    ConfigError,
    Decision,
    Evicted,
    Preempted,
    QuotaEnforced,
    Resources,
    Unreserved,
    format_moment,
    printable,
    printable_lines,
    type_of,
)
from preemptd.projections import ClusterState, LogRecord, PartitionState, Rejected, Words
from preemptd.scheduling import (
    Change,
    Divergence,
    ReplayReport,
    amounts_text,
    apply,
    column_text,
    config_changes,
    configured_alone,
    counted,
    describe,
    model_named,
)

if TYPE_CHECKING:  # the store brings SQLAlchemy, which commands that only print need not load
    from ..records import DeadLetter

__all__ = ["clock", "config_change", "dead_letter", "explanation", "printable", "printable_lines", "queue_table", "replay_summary", "summary"]


def _printable_decision(value: Any) -> Any:
    """The decision with every string in it (names, reasons, resource names) made printable;
    rebuilt without validation, since an escaped name may be longer than the contract allows."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Resources):
        return Resources({printable(name): amount for name, amount in value.items()})
    if isinstance(value, tuple):
        return tuple(map(_printable_decision, value))
    if isinstance(value, dict):
        return {printable(key): _printable_decision(item) for key, item in value.items()}
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.replace(value, **{name: _printable_decision(getattr(value, name)) for name in value.__struct_fields__})
    return value


def clock(ms: int) -> str:
    """A log time: UTC to the millisecond, or from a simulated log's start (`40s after the start`)."""
    moment = format_moment(ms)
    if moment.endswith("after the start"):
        return moment
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _flavors(flavors: Mapping[str, str]) -> str:
    return ", ".join(f"{resource} in {flavor}" for resource, flavor in sorted(flavors.items())) or "no flavors"


def _words_of(model: str) -> Words:
    """A model's words, for a decision said without its partition (`tail`); a model this
    version lacks says the default words."""
    try:
        return model_named(model).words
    except ConfigError:
        return Words()


def summary(decision: Decision) -> str:
    """`allocated  a-1 -> node-1 (root.q)`: what a shim author watching `tail` needs."""
    decision = _printable_decision(decision)
    kind = type_of(decision).removeprefix("decision.")
    match decision:
        case Allocated():
            what = f"{decision.task} -> {decision.node} ({decision.queue})"
        case Preempted():
            victims = ", ".join(v.task for v in decision.victims)
            what = f"{decision.preemptor} ({decision.queue}) on {decision.node}: evict {victims} [{decision.reason}]"
        case Blocked():
            what = f"{decision.task} ({decision.queue}): {'; '.join(decision.reasons)}"
        case QuotaEnforced():
            victims = ", ".join(v.task for v in decision.victims) or "nothing"
            short = f"; {amounts_text(decision.short)} stays over it (nothing more may be taken)" if decision.short else ""
            what = f"{decision.queue} over its {_words_of(decision.model).limit} {amounts_text(decision.max)}: evict {victims} [quota]{short}"
        case Unreserved():
            what = f"{decision.task} off {decision.node}: {decision.reason}"
        case Admitted():
            what = f"{decision.app} ({decision.queue}) {_flavors(decision.flavors)}"
        case Evicted():
            what = f"{decision.app} ({decision.queue}) for {decision.preemptor or '-'} [{decision.reason}]"
        case _:
            what = f"{getattr(decision, 'app', '')} ({getattr(decision, 'queue', '')})"
    return f"{clock(decision.ts)} {decision.partition} {kind:<10} {what}  [{decision.id}]"


def would(decision: Mapping[str, Any], words: Words | None = None) -> str:
    """A decision of a `try` answer (JSON), in one line: when, and what would happen; with the
    `words` of a model that decides about applications as a whole (Kueue), said of them."""
    d = decision
    after = d.get("after_ms", 0)
    when = "now" if not after else f"in {after / 1000:g} s, when {d.get('when', 'the next cycle runs')}"
    if words is not None:
        return printable(f"{when}: {_would_whole(d, words)}")
    match d.get("type"):
        case "decision.allocated":
            what = f"{d['task']} would be allocated on {d['node']} ({d['queue']})"
        case "decision.preempted":
            victims = ", ".join(f"{v['task']} ({v['queue']})" for v in d["victims"])
            what = f"{d['preemptor']} ({d['queue']}) would preempt {victims} on {d['node']} [{d['reason']}]"
        case "decision.blocked":
            what = f"{d['task']} ({d['queue']}) would wait: {'; '.join(d['reasons'])}"
        case "decision.admitted":
            what = f"{d['app']} ({d['queue']}) would be admitted: {_flavors(d.get('flavors') or {})}"
        case "decision.evicted":
            what = f"{d['app']} ({d['queue']}) would be evicted for {d.get('preemptor') or '-'} [{d['reason']}]: {d.get('message', '')}"
        case "decision.unreserved":
            what = f"{d['task']} would lose its reservation on {d['node']}: {d['reason']}"
        case other:
            what = f"{other}: {d.get('task') or d.get('app')}"
    return printable(f"{when}: {what}")


def _would_whole(d: Mapping[str, Any], words: Words) -> str:
    """What would happen to a workload, in the words of a model that admits workloads, not pods."""
    subject = f"{words.application} {d.get('app') or d.get('preemptor')} ({words.queue} {d['queue']})"
    match d.get("type"):
        case "decision.blocked":
            return f"{subject} would wait: {'; '.join(d['reasons'])}"
        case "decision.admitted":
            return f"{subject} would be admitted: {_flavors(d.get('flavors') or {})}"
        case "decision.evicted":
            return f"{subject} would be evicted for {d.get('preemptor') or '-'} [{d['reason']}]: {d.get('message', '')}"
        case other:
            return f"{other}: {subject}"


def config_change(record: LogRecord, previous: LogRecord | None = None) -> str:
    """A `config.applied` of the log: what it runs, the notes its model gave on it, where it came
    from, and what it changed from `previous` (the partition's configuration before it)."""
    event = record.event
    assert isinstance(event, ConfigApplied) and (previous is None or isinstance(previous.event, ConfigApplied))
    lines = [f"{event.id}  config.applied", f"  at {clock(record.received)}, partition {event.partition}, log seq {record.seq}"]
    if event.source:
        lines.append(f"  from {event.source} (sha256 {event.digest or '?'})")
    state = ClusterState()
    try:
        before = configured_alone(previous.event) if previous is not None else None  # type: ignore[arg-type]  # asserted above
        notes = apply(state, LogRecord(record.seq, record.received, event))
    except Rejected as exc:
        return printable_lines("\n".join([*lines, f"  refused by this version: {exc.reason}"]))
    after = state.partitions[event.partition]
    lines.append(f"  runs: {describe(after)}")
    lines += [f"  note: {note}" for note in notes]
    if previous is None:
        lines.append("  the partition's first configuration")
    else:
        changes = config_changes(before, after)
        lines.append(
            f"  changed from the one at log seq {previous.seq}:" if changes else f"  the same as the one at log seq {previous.seq} in what `state` shows"
        )
        lines += [f"    {change}" for change in changes]
    return printable_lines("\n".join(lines))


def explanation(decision: Decision, seq: int, words: Words) -> str:
    """Everything a decision says about itself, laid out for reading, in the `words` of its
    partition's model."""
    decision = _printable_decision(decision)
    kind = type_of(decision)
    application, task, queue = words.application, words.task, words.queue
    lines = [f"{decision.id}  {kind}", f"  at {clock(decision.ts)}, partition {decision.partition}, cycle {decision.cycle}, log seq {seq}"]
    match decision:
        case Allocated():
            lines.append(
                f"  {task} {decision.task} ({application} {decision.app}, {queue} {decision.queue}) asks {amounts_text(decision.resources)}: allocated "
                f"to {decision.node}"
            )
        case Preempted():
            lines.append(
                f"  preemptor {task} {decision.preemptor} ({application} {decision.app}, {queue} {decision.queue}) asks {amounts_text(decision.resources)}"
            )
            lines.append(f"  node {decision.node} is {words.reserved} for it; reason: {decision.reason}; model {decision.model}")
            lines.append("  victims:")
            for victim in decision.victims:
                lines.append(
                    f"    - {task} {victim.task} ({application} {victim.app}, {queue} {victim.queue}, priority {victim.priority}, "
                    f"{amounts_text(victim.resources)})"
                )
                lines.append(f"      why: {victim.why}")
        case QuotaEnforced():
            lines.append(
                f"  {queue} {decision.queue} is over its {words.limit} {amounts_text(decision.max)}: {amounts_text(decision.target)} to shed; model "
                f"{decision.model}"
            )
            if decision.short:
                lines.append(f"  {amounts_text(decision.short)} stays over the {words.limit}: nothing more may be taken (the explanation says what stopped it)")
            lines.append("  victims:" if decision.victims else "  victims: none")
            for victim in decision.victims:
                lines.append(
                    f"    - {task} {victim.task} ({application} {victim.app}, {queue} {victim.queue}, priority {victim.priority}, "
                    f"{amounts_text(victim.resources)})"
                )
                lines.append(f"      why: {victim.why}")
        case Admitted():
            lines.append(f"  {application} {decision.app} is admitted to {queue} {decision.queue}: {_flavors(decision.flavors)}")
        case Evicted():
            lines.append(
                f"  {application} {decision.app} ({queue} {decision.queue}) is evicted; reason: {decision.reason}; preemptor: {decision.preemptor or '-'}"
            )
            if decision.message:
                lines.append(f"  message: {decision.message}")
        case Blocked():
            lines.append(f"  {task} {decision.task} ({application} {decision.app}, {queue} {decision.queue}) waits:")
            lines += [f"    - {reason}" for reason in decision.reasons]
        case Unreserved():
            lines.append(f"  {task} {decision.task} is no longer {words.reserved} on {decision.node}: {decision.reason}")
    if decision.explanation:
        lines.append("  checks:")
        lines += [f"    - {line}" for line in decision.explanation]
    return "\n".join(lines)


def dead_letter(dead: DeadLetter) -> str:
    """When, where, which event, why, and the start of what was sent."""
    raw = dead.raw.decode(errors="replace")
    shown = printable(raw[:200]) + ("" if len(raw) <= 200 else f"... ({len(dead.raw)} bytes)")
    where = f"{printable(dead.subject)} id={printable(dead.event_id or '-')} type={printable(dead.event_type or '-')}"
    return f"{clock(dead.received)} {where}\n  {printable(dead.reason)}\n  sent: {shown}"


#: A queue's usage in `state`, each column the queue's own unless the model gives one of that
#: name (`Model.queue_columns`: Kueue's pending is what waits for admission, not for a node).
_USAGE = ("allocated", "pending", "preempting")


def queue_table(p: PartitionState, seq: int) -> str:
    """The queue tree with usage, and what the model says of each queue in its own terms
    (`Model.queue_columns`: YuniKorn's guarantee and max, Kueue's quotas, Volcano's shares)."""
    columns = model_named(p.model).views.queue_columns(p)
    usage = {name: values for name, values in columns if name in _USAGE}  # the model's own meaning of one (Kueue's pending: not admitted)
    columns = [(name, values) for name, values in columns if name not in _USAGE]
    words = model_named(p.model).views.usage_words
    header = ("QUEUE", *(words.get(name, name).upper() for name in _USAGE), *(name.upper().replace("_", " ") for name, _ in columns), "TASKS")
    rows = [header]
    for queue in p.queues.values():
        name = "  " * (len(queue.lineage) - 1) + printable(queue.path.rsplit(".", 1)[-1])  # nested under its parent, whatever the model names it
        tasks = f"{len(queue.running)} run / {queue.waiting} wait" if queue.leaf else ""
        used = tuple(column_text(usage[what].get(queue.path)) if what in usage else amounts_text(getattr(queue, what)) for what in _USAGE)
        said = tuple(column_text(values.get(queue.path)) for _, values in columns)
        rows.append((name, *used, *said, tasks))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    body = "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)
    nodes = f"{counted(len(p.nodes), 'node')}, capacity {amounts_text(p.capacity)}; {counted(len(p.tasks), 'task')} ({p.pending_count} pending)"
    tables = "".join(f"\n\n{_table(rows)}" for _, rows in model_named(p.model).views.tables(p) if rows)
    return f"partition {printable(p.name)} at log seq {seq}\n{printable(describe(p))}\n{nodes}\n\n{body}{tables}"


def _table(rows: list[dict[str, Any]]) -> str:
    """Rows of a model's table (`Model.tables`), their keys as the heading."""
    header = tuple(key.upper().replace("_", " ") for key in rows[0])
    cells = [header, *(tuple(column_text(value) for value in row.values()) for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells)


def tables_json(p: PartitionState) -> dict[str, list[dict[str, Any]]]:
    """The model's tables as `state --json` gives them: what the text shows."""
    return {name: [{key: _column_json(value) for key, value in row.items()} for row in rows] for name, rows in model_named(p.model).views.tables(p)}


def tables_text(p: PartitionState, limit: int) -> dict[str, dict[str, Any]]:
    """The queues as the user set them (each queue's columns in its model's terms: YuniKorn's
    guarantee and max, Kueue's quotas, Volcano's weight, capability and guarantee), then the
    model's tables, as the text shows them, at most `limit` rows each (for the report): per
    table its headings, its rows of cells, and how many rows it has."""
    columns = [(name, values) for name, values in model_named(p.model).views.queue_columns(p) if name not in _USAGE]
    queues = [
        {"queue": "  " * (len(queue.lineage) - 1) + queue.path, **{name: values.get(path) for name, values in columns}} for path, queue in p.queues.items()
    ]
    out = {}
    for name, rows in [("queues", queues), *model_named(p.model).views.tables(p)]:
        if rows:
            headings = [key.replace("_", " ") for key in rows[0]]
            out[name] = {"columns": headings, "rows": [[column_text(value) for value in row.values()] for row in rows[:limit]], "total": len(rows)}
    return out


def queue_columns_json(p: PartitionState) -> dict[str, dict[str, Any]]:
    """Per queue, the model's columns as `state --json` gives them: what the table shows."""
    columns = model_named(p.model).views.queue_columns(p)
    return {path: {name: _column_json(values.get(path)) for name, values in columns} for path in p.queues}


def _column_json(value: Any) -> Any:
    if isinstance(value, Fraction):
        return round(float(value), 4)
    if isinstance(value, Mapping) and any(isinstance(v, Mapping) for v in value.values()):
        return {flavor: Resources(amounts).to_wire() for flavor, amounts in value.items()}
    if isinstance(value, Mapping):
        return Resources(value).to_wire()
    return value


def replay_summary(report: ReplayReport, *, what_if: bool) -> str:
    head = f"replayed {counted(report.events, 'event')} and {counted(report.cycles, 'cycle')}"
    if what_if:
        return "\n".join([head, *_changes(report.changes), _what_if_total(report), *_rejections(report)])
    if report.divergence is not None:
        return "\n".join([head, *_divergence(report.divergence, report.reproduced)])
    return f"{head}: all {counted(report.reproduced, 'decision')} reproduced"


def _divergence(divergence: Divergence, reproduced: int) -> list[str]:
    lines = [f"DIVERGED at log seq {divergence.seq} (cycle {divergence.cycle}) after {reproduced} decisions reproduced"]
    lines.append(f"  stored:     {summary(divergence.stored) if divergence.stored else '(none)'}")
    lines.append(f"  recomputed: {summary(divergence.recomputed) if divergence.recomputed else '(none)'}")
    lines += [f"  - {difference}" for difference in divergence.differences()]
    return lines


def _changes(changes: list[Change]) -> list[str]:
    lines = []
    for change in changes:
        lines.append(f"cycle {change.cycle}:")
        lines += [f"  - stored only: {summary(d)}" for d in change.only_stored]
        lines += [f"  + new config:  {summary(d)}" for d in change.only_new]
    return lines


def _what_if_total(report: ReplayReport) -> str:
    removed = sum(len(c.only_stored) for c in report.changes)
    added = sum(len(c.only_new) for c in report.changes)
    return (
        f"{counted(len(report.changes), 'cycle differs', 'cycles differ')}: {counted(removed, 'stored decision')} not made, "
        f"{counted(added, 'new decision')} (of {report.stored_decisions} stored)"
    )


def _rejections(report: ReplayReport) -> list[str]:
    if not report.rejected:
        return []
    shown = [f"  seq {seq}: {printable(reason)}" for seq, reason in report.rejected[:5]]
    return [f"{len(report.rejected)} events no longer apply under the new configuration:", *shown]
