"""What the YuniKorn model keeps of a partition between cycles, outside snapshots
(`PartitionState.kept`): made again from the state when absent."""

from __future__ import annotations

from dataclasses import dataclass

from preemptd.projections import NodeState, PartitionState

from ._backlog import Backlog

__all__ = ["YuniKornKept", "backlog", "kept", "nodes_by_name"]


@dataclass
class YuniKornKept:
    """`backlog`: the waiting tasks in the order cycles try them (dropped at a configuration
    change: queues, their delays and the tasks' order may change with it); `nodes`: the
    schedulable nodes by name, the order placement tries them in (dropped at a node's event)."""

    backlog: Backlog | None = None
    nodes: list[NodeState] | None = None


def kept(p: PartitionState) -> YuniKornKept:
    """The partition's `YuniKornKept`, empty the first time."""
    found = p.kept.model
    if not isinstance(found, YuniKornKept):
        found = p.kept.model = YuniKornKept()
    return found


def backlog(p: PartitionState, now: int, fresh: bool = False) -> Backlog:
    """The partition's backlog, filed up to date at `now` (built whole the first time); with
    `fresh`, for allocation: a few changed tasks kept apart (`Backlog.refresh`)."""
    found = kept(p)
    if found.backlog is None:
        found.backlog = Backlog(p)
    found.backlog.refresh(p, now, fresh)
    return found.backlog


def nodes_by_name(p: PartitionState) -> list[NodeState]:
    """The partition's schedulable nodes in name order (made again after a node's event)."""
    found = kept(p)
    if found.nodes is None:
        found.nodes = [p.nodes[name] for name in sorted(p.nodes) if p.nodes[name].schedulable]
    return found.nodes
