"""The timeline of a log, for `preemptd report`: what each queue held over time against its
bounds, in its model's terms (`Model.curves`), the shares the model orders queues by, every
decision, configuration changes and dead letters, and a summary.

A pure fold over the log's records (the same `apply` as the daemon's), observed as it goes:
queue amounts are sampled (at most `samples` times a partition, fewer in a large tree, about
evenly spaced in its records, and at the end), decisions are all kept. A sample is taken at the
end of the instant it falls in (once the partition's records of that `received` time are all
folded), never between a tick and its decisions: a curve shows what a queue held between
cycles, not half a cycle's decisions. Times are the records' `received`, in seconds.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from preemptd.events import Admitted, Allocated, ConfigApplied, Decision, to_builtins
from preemptd.projections import ClusterState, LogRecord, PartitionState, Rejected

from ._registry import apply, describe, model_named
from ._replay import DecisionKey, builtins_key
from ._views import Curve, Curves, curve_unit

__all__ = ["Timeline", "Window", "compare"]

_LONGEST = 10  # rows of each ranking in the summary
_VALUES = 1_000_000  # sampled values a partition's curves hold at most (see `Timeline._sample`)
_FEWEST = 100  # points a curve gets however large the tree


@dataclass(frozen=True)
class Window:
    """The records a report shows: `first <= seq <= last`, and received within `since..until` (ms)."""

    first: int = 0
    last: int | None = None
    since: int | None = None
    until: int | None = None

    def holds(self, record: LogRecord) -> bool:
        return (
            record.seq >= self.first
            and (self.last is None or record.seq <= self.last)
            and (self.since is None or record.received >= self.since)
            and (self.until is None or record.received <= self.until)
        )

    def passed(self, record: LogRecord) -> bool:
        """Past the window: nothing after `record` is shown."""
        return (self.last is not None and record.seq > self.last) or (self.until is not None and record.received > self.until)


@dataclass
class _Partition:
    """What a report gathers about one partition."""

    name: str
    model: str = ""
    times: list[float] = field(default_factory=list)
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> {lineage (root first), depth, leaf, series: {resource: {curve: [..]}}}
    shares: dict[str, list[float | None]] = field(default_factory=dict)  # queue or cohort -> its share at each time
    decisions: list[dict[str, Any]] = field(default_factory=list)
    markers: list[dict[str, Any]] = field(default_factory=list)
    waits: list[dict[str, Any]] = field(default_factory=list)


class Timeline:
    """Observes a fold of the log: `step` each record in order, then `result()`."""

    def __init__(self, log_id: str, total: int, *, window: Window = Window(), partition: str | None = None, samples: int = 2000) -> None:
        """`total`: about how many records the window holds (curves get `samples` points each)."""
        self.state = ClusterState(log_id=log_id)
        self.window = window
        self.only = partition
        self.total, self.samples = total, samples
        self.stride: dict[str, int] = {}  # per partition: records between two samples
        self.partitions: dict[str, _Partition] = {}
        self.seen: Counter[str] = Counter()  # records of each partition in the window
        self.first: LogRecord | None = None
        self.last: LogRecord | None = None
        self.dead_letters: list[dict[str, Any]] = []
        self.due: dict[str, int] = {}  # per partition: a sample is due when the instant (received, ms) ends

    def step(self, record: LogRecord) -> None:
        event = record.event
        due = self.due.get(event.partition)
        if due is not None and record.received != due:  # the instant ended with the record before
            del self.due[event.partition]
            self._sample(self.partitions[event.partition], due)
        part = self.state.partitions.get(event.partition)
        submitted = part.submitted_for(event) if part is not None and isinstance(event, Decision) else None
        refused = None
        try:
            apply(self.state, record)
        except Rejected as exc:  # a log of another version: shown as it folds here
            self.state.seq, refused = record.seq, exc.reason
        if not self.window.holds(record) or (self.only is not None and event.partition != self.only):
            return
        self.first = self.first or record
        self.last = record
        partition = self._partition(event.partition)
        if isinstance(event, Decision):
            partition.decisions.append(_decision(record, submitted))
            if isinstance(event, Allocated | Admitted) and submitted is not None:  # a task placed, a workload admitted (Kueue places no pods)
                waited = event.task if isinstance(event, Allocated) else event.app
                partition.waits.append({"task": waited, "queue": event.queue, "seconds": (record.received - submitted) / 1000, "id": event.id})
        elif isinstance(event, ConfigApplied):
            said = (
                f"configuration refused by this version: {refused}" if refused else f"configuration applied: {describe(self.state.partitions[event.partition])}"
            )
            partition.markers.append({"seq": record.seq, "t": record.received / 1000, "kind": "config", "text": said})
        seen = self.seen[event.partition] = self.seen[event.partition] + 1
        if seen == 1 or seen % self.stride.get(event.partition, 1) == 0 or isinstance(event, ConfigApplied):  # its first record in the window too
            self.due[event.partition] = record.received

    def dead_letter(self, received: int, partition: str | None, reason: str, event_id: str | None) -> None:
        """A dead letter, marked where it arrived if that is within the window's period."""
        if self.only is None or partition == self.only:
            self.dead_letters.append({"t": received / 1000, "kind": "dead_letter", "partition": partition, "text": f"dead letter {event_id or ''}: {reason}"})

    def result(self, title: str) -> dict[str, Any]:
        """The report's data, as JSON values (once: it closes the curves)."""
        for name, partition in self.partitions.items():
            if name in self.due:
                self._sample(partition, self.due.pop(name))
            if self.last is not None:
                self._sample(partition, self.last.received)  # the state at the end of the window
                _every_curve(partition)
                _hold(partition)
            end = self.last.received if self.last is not None else 0
            partition.waits += _still_waiting(self.state.partitions[name], end)
        times = [record.received for record in (self.first, self.last) if record is not None]
        return {
            "title": title,
            "log_id": self.state.log_id,
            "absolute_time": bool(times) and times[0] > 10**11,  # epoch milliseconds, not a scenario's
            "period": {"from": _point(self.first), "to": _point(self.last)},
            "partitions": [self._partition_result(p) for _, p in sorted(self.partitions.items())],
        }

    # -- gathering --

    def _partition(self, name: str) -> _Partition:
        if name not in self.partitions:
            self.partitions[name] = _Partition(name)
        return self.partitions[name]

    def _sample(self, partition: _Partition, received: int) -> None:
        """What each queue of `partition` holds now, at `received` (ms)."""
        view = self.state.partitions.get(partition.name)
        if view is None:
            return
        partition.model = view.model
        t = received / 1000
        if partition.times and partition.times[-1] == t:  # one point per moment: the last state at it
            partition.times.pop()
            for entry in partition.queues.values():
                for amounts in entry["series"].values():
                    for values in amounts.values():
                        values.pop()
            for values in partition.shares.values():
                values.pop()
        index = len(partition.times)
        partition.times.append(t)
        model = model_named(view.model)
        curves = model.views.curves(view)
        resources = _resources(view, curves)
        # At most `samples` points a curve, fewer in a large tree: the page holds about
        # _VALUES values a partition (a thousand queues get 250 points each).
        points = min(self.samples, max(_FEWEST, _VALUES // max(1, len(view.queues) * len(resources) * len(model.views.curve_words))))
        self.stride[partition.name] = max(1, self.total // points)
        for path, queue in sorted(view.queues.items()):
            entry = partition.queues.setdefault(path, {"lineage": queue.lineage[::-1], "depth": len(queue.lineage) - 1, "leaf": queue.leaf, "series": {}})
            entry["leaf"] = queue.leaf
            amounts = {"allocated": queue.allocated, "pending": queue.pending, **curves.get(path, {})}
            for resource in resources:
                series = entry["series"].setdefault(resource, {})
                for curve in model.views.curve_words:  # a partition that changed model has the new one's curves from here on
                    series.setdefault(curve.name, [None] * index)
                    held = amounts.get(curve.name)
                    if held is not None and (resource in held or curve.kind != "bound"):
                        series[curve.name].append(curve_unit(resource, held.get(resource, 0)))
                    else:
                        series[curve.name].append(None)  # no guarantee, no max: no line
        for name, share in sorted(model.views.shares(view).items()):
            partition.shares.setdefault(name, [None] * index).append(share)
        for entry in partition.queues.values():  # queues gone, and resources a queue never had: no value here
            for series in entry["series"].values():
                for values in series.values():
                    values.extend([None] * (index + 1 - len(values)))
        for values in partition.shares.values():
            values.extend([None] * (index + 1 - len(values)))

    def _partition_result(self, partition: _Partition) -> dict[str, Any]:
        counts = Counter(d["type"] for d in partition.decisions)
        model = model_named(partition.model or None)
        start, end = (self.first.received / 1000, self.last.received / 1000) if self.first and self.last else (0, -1)
        dead = [d for d in self.dead_letters if d["partition"] == partition.name and start <= d["t"] <= end]
        return {
            "name": partition.name,
            "model": partition.model,
            "curves": [{"name": c.name, "words": c.words, "kind": c.kind, "on": c.on} for c in model.views.curve_words],
            "times": partition.times,
            "shares": {"words": model.views.share_words, "series": partition.shares},
            "queues": [{"path": path, **_drawn(queue)} for path, queue in sorted(partition.queues.items(), key=lambda item: item[1]["lineage"])],  # tree order
            "decisions": partition.decisions,
            "markers": partition.markers + dead,
            "summary": {
                "decisions": dict(sorted(counts.items())),
                "under_guarantee": _under_guarantee(partition, model.views.curve_words),
                "longest_waits": sorted(partition.waits, key=lambda w: (-w["seconds"], w["task"]))[:_LONGEST],
            },
        }


def _still_waiting(p: PartitionState, end: int) -> list[dict[str, Any]]:
    """What still waits at `end`, and for how long: its tasks, or under a model that decides
    about applications as a whole (Kueue admits workloads) its applications, not their pods."""
    whole = model_named(p.model).decides_applications
    waiting: dict[str, dict[str, Any]] = {}
    for task in sorted(p.tasks.values(), key=lambda t: t.id):
        if task.status == "pending" and task.submitted_at <= end:
            name, since = (task.app, p.apps[task.app].submitted_at) if whole and task.app in p.apps else (task.id, task.submitted_at)
            waiting.setdefault(name, {"task": name, "queue": task.queue, "seconds": (end - since) / 1000, "id": None})
    return list(waiting.values())


def _every_curve(partition: _Partition) -> None:
    """Every series with each curve of the partition's model, none where it had none: a queue or
    resource drawn only under a model the partition had before lacks the last one's curves."""
    names = [curve.name for curve in model_named(partition.model or None).views.curve_words]
    for queue in partition.queues.values():
        for series in queue["series"].values():
            for name in names:
                series.setdefault(name, [None] * len(partition.times))


def _hold(partition: _Partition) -> None:
    """Draw the last state a while longer (a fiftieth of the period, a second at least), so
    that what the last records changed shows as a step, not at the chart's very edge."""
    times = partition.times
    times.append(times[-1] + max(1.0, (times[-1] - times[0]) / 50))
    for queue in partition.queues.values():
        for series in queue["series"].values():
            for values in series.values():
                values.append(values[-1])
    for values in partition.shares.values():
        values.append(values[-1])


def _drawn(queue: dict[str, Any]) -> dict[str, Any]:
    """A queue's entry without the resources it never held, asked for or was bounded in."""
    series = {resource: amounts for resource, amounts in queue["series"].items() if any(v for values in amounts.values() for v in values)}
    return {**queue, "series": series}


def _resources(view: PartitionState, curves: Curves) -> list[str]:
    """What gets a chart: the resources the model's curves name and, unless the model gives
    what queues hold itself (Kueue's per flavor), the cluster's and the queues' own."""
    names = {resource for amounts in curves.values() for held in amounts.values() for resource in held}
    if not any("allocated" in amounts for amounts in curves.values()):
        names.update(view.capacity)
        for queue in view.queues.values():
            names.update(queue.allocated, queue.pending)
    return sorted(names)


def _decision(record: LogRecord, submitted: int | None) -> dict[str, Any]:
    data: dict[str, Any] = to_builtins(record.event)
    del data["partition"], data["ts"]  # the section's, and `t`
    data.update(seq=record.seq, t=record.received / 1000)
    if submitted is not None:
        data["waited"] = (record.received - submitted) / 1000
    return data


def _point(record: LogRecord | None) -> dict[str, Any] | None:
    return None if record is None else {"seq": record.seq, "t": record.received / 1000}


def _under_guarantee(partition: _Partition, curves: tuple[Curve, ...]) -> list[dict[str, Any]]:
    """Per queue, the time it spent below its guarantee (the first bound curve) in some
    resource with asks pending (what the asked curve stacks on: allocated, or Kueue's admitted)."""
    asked = next(c for c in curves if c.kind == "asked")
    bound = next(c.name for c in curves if c.kind == "bound")
    spent: defaultdict[str, float] = defaultdict(float)
    times = partition.times[:-1]  # without the last state's hold (`_hold`): the period ends before it
    for path, queue in partition.queues.items():
        for i in range(len(times) - 1):
            if any(_short(amounts[bound][i], amounts[asked.on][i], amounts[asked.name][i]) for amounts in queue["series"].values()):
                spent[path] += times[i + 1] - times[i]
    ranked = sorted(((seconds, path) for path, seconds in spent.items() if seconds > 0), key=lambda item: (-item[0], item[1]))
    return [{"queue": path, "seconds": round(seconds, 3)} for seconds, path in ranked[:_LONGEST]]


def _short(guaranteed: float | None, held: float | None, pending: float | None) -> bool:
    return bool(guaranteed) and (held or 0) < (guaranteed or 0) and bool(pending)


def compare(here: dict[str, Any], other: dict[str, Any], other_name: str) -> dict[str, Any]:
    """The decisions of two reports' data that differ (what each does, not its id or time)."""

    def decisions(data: dict[str, Any]) -> list[dict[str, Any]]:
        return [d for partition in data["partitions"] for d in partition["decisions"]]

    def key(decision: dict[str, Any]) -> DecisionKey:
        return builtins_key(decision, ignored=("seq", "t", "waited"))

    mine, theirs = Counter(map(key, decisions(here))), Counter(map(key, decisions(other)))
    only_here, only_other = mine - theirs, theirs - mine

    def pick(data: dict[str, Any], wanted: Counter[DecisionKey]) -> list[dict[str, Any]]:
        out, left = [], Counter(wanted)
        for decision in decisions(data):
            if left[key(decision)] > 0:
                left[key(decision)] -= 1
                out.append(decision)
        return out

    return {"other": other_name, "only_here": pick(here, only_here), "only_other": pick(other, only_other), "same": sum((mine & theirs).values())}
