"""Builders for events and logs in tests, so that a test names only what matters to it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from preemptd import events as ev
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import CycleRecords, _simulation, apply, run_cycle

_ids = itertools.count(1)


def R(**amounts: Any) -> ev.Resources:
    return ev.Resources.parse(amounts)


def node(name: str, ts: int = 0, **capacity: Any) -> ev.NodeUpserted:
    return ev.NodeUpserted(id=f"e{next(_ids)}", ts=ts, node=name, capacity=R(**capacity))


def task(name: str, app: str, queue: str | None = None, ts: int = 0, **fields: Any) -> ev.TaskSubmitted:
    resources = fields.pop("resources", None) or R(vcore=1)
    return ev.TaskSubmitted(id=f"e{next(_ids)}", ts=ts, task=name, app=app, queue=queue, resources=resources, **fields)


def bound(name: str, node_name: str, ts: int = 0, **fields: Any) -> ev.TaskBound:
    return ev.TaskBound(id=f"e{next(_ids)}", ts=ts, task=name, node=node_name, **fields)


def released(name: str, ts: int = 0) -> ev.TaskReleased:
    return ev.TaskReleased(id=f"e{next(_ids)}", ts=ts, task=name)


def config(queues: list[dict[str, Any]], ts: int = 0, **partition: Any) -> ev.ConfigApplied:
    return ev.ConfigApplied(id=f"e{next(_ids)}", ts=ts, config={"queues": [{"name": "root", "queues": queues}], **partition})


def fold_events(*events: Any, state: ClusterState | None = None) -> ClusterState:
    state = state if state is not None else ClusterState()
    for event in events:
        apply(state, LogRecord(state.seq + 1, event.ts, event))
    return state


def running_every_cycle(patch: pytest.MonkeyPatch) -> None:
    """Have `simulate` run every cycle, none passed over because nothing changed since one that
    decided nothing: what a passed-over cycle must not change."""

    def every_cycle(state: ClusterState, tick: LogRecord, out_of_time: Any = None) -> CycleRecords:
        for p in state.partitions.values():
            p.kept.settled_at = -1
        return run_cycle(state, tick, out_of_time)

    patch.setattr(_simulation, "run_cycle", every_cycle)
