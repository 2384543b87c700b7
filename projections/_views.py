"""Read-only views of the state for people and tools: the queue tree, tasks, nodes."""

from __future__ import annotations

from typing import Any

from preemptd.events import Resources

from ._state import PartitionState

__all__ = ["partition_view", "queue_depth"]


def _wire(amounts: dict[str, int] | None) -> dict[str, int | str] | None:
    return None if amounts is None else Resources(amounts).to_wire()


def queue_depth(path: str) -> int:
    return path.count(".")


def partition_view(p: PartitionState) -> dict[str, Any]:
    """The partition as plain data: per queue its usage against guarantee and max, per task its
    status, node and queue, per node its capacity and use. Quantities in wire notation."""
    return {
        "partition": p.name,
        "model": p.model,
        "queues": {
            q.path: {
                "allocated": _wire(q.allocated),
                "pending": _wire(q.pending),
                "preempting": _wire(q.preempting),
                "reserved": _wire(q.reserved),
                "guaranteed": _wire(q.guaranteed),
                "max": _wire(q.max),
                "running_tasks": len(q.running),
                "pending_tasks": q.waiting,
            }
            for q in p.queues.values()
        },
        "nodes": {
            n.name: {
                "capacity": _wire(n.capacity),
                "allocated": _wire(n.allocated),
                "reserved": _wire(n.reserved),
                "schedulable": n.schedulable,
                "tasks": len(n.tasks),
            }
            for n in p.nodes.values()
        },
        "tasks": {t.id: {"status": t.status, "node": t.node, "queue": t.queue, "app": t.app, "reserved_node": t.reserved_node} for t in p.tasks.values()},
    }
