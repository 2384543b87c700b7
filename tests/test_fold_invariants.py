"""The fold's incremental aggregates equal a recount from scratch, after any sequence of events
and decisions: config changes, nodes cordoned and removed, applications finished, tasks bound,
moved, preempted and released in any order. A rejected event changes nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings, strategies as st

from preemptd import events as ev
from preemptd.projections import ClusterState, LogRecord, PartitionState, Rejected, add, reservation_claim
from preemptd.scheduling import apply, snapshot

TREES = [
    [{"name": "a", "resources": {"guaranteed": {"vcore": 4}}, "queues": [{"name": "a1"}, {"name": "a2"}]}, {"name": "b"}],
    [{"name": "a", "queues": [{"name": "a1"}, {"name": "a2"}]}, {"name": "b", "resources": {"max": {"vcore": 6}}}],
]
LEAVES = ["root.a.a1", "root.a.a2", "root.b"]
KINDS = ["config", "node", "cordon", "remove-node", "finish-app", "submit", "bind", "move", "release", "allocate", "preempt", "unreserve"]
# Frequent enough to build up tasks, reservations and victims between the disruptions.
WEIGHTED = ["submit"] * 6 + ["allocate"] * 4 + ["preempt"] * 4 + ["bind", "release", "release", "move", "unreserve"] + KINDS
START = [("config", 0), ("node", 4), ("node", 5)]


def _r(vcore: int, memory: int = 0) -> ev.Resources:
    return ev.Resources.parse({"vcore": vcore, "memory": f"{memory}Gi"})


def _decision(kind: type, **fields) -> ev.Decision:
    return kind(id="d", ts=0, partition="default", cycle=0, **fields)


def _event(kind: str, pick: int, p: PartitionState | None, n: int):
    """An event or decision of `kind`, built from the current state; `pick` chooses among things."""
    tasks = list(p.tasks.values()) if p else []
    nodes = sorted(p.nodes) if p else []
    choose = lambda items: items[pick % len(items)] if items else None  # noqa: E731
    pending = [t for t in tasks if t.status == "pending" and t.reserved_node is None]
    running = [t for t in tasks if t.status == "running"]
    task, node = choose(tasks), choose(nodes)
    match kind:
        case "config":
            return ev.ConfigApplied(id=f"e{n}", ts=0, config={"queues": [{"name": "root", "queues": TREES[pick % 2]}]})
        case "node" | "cordon":
            return ev.NodeUpserted(id=f"e{n}", ts=0, node=f"n{pick % 3}", capacity=_r(4 + pick % 5, pick % 3), schedulable=kind == "node")
        case "remove-node" if node:
            return ev.NodeRemoved(id=f"e{n}", ts=0, node=node)
        case "finish-app" if p and p.apps:
            return ev.AppFinished(id=f"e{n}", ts=0, app=choose(sorted(p.apps)))
        case "submit":
            return ev.TaskSubmitted(
                id=f"e{n}", ts=0, task=f"t{n}", app=f"app{pick % 3}-{LEAVES[pick % 3]}", queue=LEAVES[pick % 3], resources=_r(1 + pick % 3, pick % 2)
            )
        case "bind" if node and task:
            return ev.TaskBound(id=f"e{n}", ts=0, task=task.id, node=node)
        case "move" if node and running:
            return ev.TaskBound(id=f"e{n}", ts=0, task=choose(running).id, node=node)
        case "release" if task:
            return ev.TaskReleased(id=f"e{n}", ts=0, task=task.id)
        case "allocate" if node and pending:
            return _decision(ev.Allocated, task=choose(pending).id, app="a", queue="q", node=node, resources=_r(1))
        case "preempt" if pending and running:
            victims = [t for t in running if t.node == running[pick % len(running)].node][: 1 + pick % 2]
            victim = lambda t: ev.Victim(task=t.id, app=t.app, queue=t.queue, node=t.node, priority=0, resources=_r(1))  # noqa: E731
            return _decision(
                ev.Preempted,
                preemptor=choose(pending).id,
                app="a",
                queue="q",
                node=victims[0].node,
                resources=_r(1),
                victims=tuple(map(victim, victims)),
                model="yunikorn",
                reason="test",
            )
        case "unreserve" if task and task.reserved_node:
            return _decision(ev.Unreserved, task=task.id, node=task.reserved_node, reason="test")
    return None


def recount(p: PartitionState) -> list[str]:
    """Every aggregate recomputed from the tasks, compared with the incremental one."""
    queues = {path: {f: {} for f in ("allocated", "preempting", "pending", "reserved", "claimed")} for path in p.queues}
    nodes = {name: {f: {} for f in ("allocated", "preempting", "reserved", "claimed")} for name in p.nodes}
    for t in p.tasks.values():
        lineage = p.queues[t.queue].lineage
        for path in lineage:
            add(queues[path]["pending" if t.status == "pending" else "allocated"], t.resources)
            if t.status == "preempting":
                add(queues[path]["preempting"], t.resources)
            if t.reserved_node:
                add(queues[path]["reserved"], t.resources)
                add(queues[path]["claimed"], reservation_claim(p, t, path))
        if t.node:
            add(nodes[t.node]["allocated"], t.resources)
            if t.status == "preempting":
                add(nodes[t.node]["preempting"], t.resources)
        if t.reserved_node:
            add(nodes[t.reserved_node]["reserved"], t.resources)
            add(nodes[t.reserved_node]["claimed"], reservation_claim(p, t))
    nonzero = lambda d: {k: v for k, v in d.items() if v}  # noqa: E731
    problems = [
        f"{kind} {name}.{field}: {getattr(holder, field)} != {wanted}"
        for kind, table, objects in (("queue", queues, p.queues), ("node", nodes, p.nodes))
        for name, fields in table.items()
        for field, wanted in fields.items()
        if nonzero(getattr(holder := objects[name], field)) != nonzero(wanted) or any(v < 0 for v in getattr(holder, field).values())
    ]
    pending = sum(t.status == "pending" for t in p.tasks.values())
    if p.pending_count != pending:
        problems.append(f"pending_count {p.pending_count} != {pending}")
    capacity: dict[str, int] = {}
    for node in p.nodes.values():
        if node.schedulable:
            add(capacity, node.capacity)
    if nonzero(capacity) != nonzero(p.capacity):
        problems.append(f"capacity {p.capacity} != {capacity}")
    return problems


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(WEIGHTED), st.integers(0, 50)), min_size=10, max_size=150))
def test_aggregates_equal_a_recount_after_any_sequence(steps: list[tuple[str, int]]) -> None:
    state = ClusterState()
    applied = set()
    for n, (kind, pick) in enumerate(START + steps):
        change = _event(kind, pick, state.partitions.get("default"), n)
        if change is None:
            continue
        before = snapshot(state)
        try:
            apply(state, LogRecord(state.seq + 1, 0, change))
        except Rejected:
            assert snapshot(state) == before, f"rejected {kind} changed the state"
            continue
        applied.add(kind)
        assert recount(state.partitions["default"]) == [], f"after {kind}"
    event(f"kinds applied: {len(applied)}")
    for kind in applied:
        event(f"applied {kind}")
