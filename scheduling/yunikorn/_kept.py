"""What the YuniKorn model keeps of a partition between cycles, outside snapshots
(`PartitionState.kept`): made again from the state when absent."""

from __future__ import annotations

from dataclasses import dataclass, field

from preemptd.projections import NodeState, PartitionState

from ._backlog import Backlog, Shape

__all__ = ["YuniKornKept", "backlog", "first_fit", "kept", "nodes_by_name"]


@dataclass
class YuniKornKept:
    """`backlog`: the waiting tasks in the order cycles try them (dropped at a configuration
    change: queues, their delays and the tasks' order may change with it); `nodes`: the
    schedulable nodes by name, the order placement tries them in, and their places (`index`)
    (dropped at a node's event); `first_fit`: per ask shape, the first node that may have room
    for it (`_placement.Placement`)."""

    backlog: Backlog | None = None
    nodes: list[NodeState] | None = None
    index: dict[str, int] = field(default_factory=dict)
    first_fit: dict[Shape, int] = field(default_factory=dict)


def kept(p: PartitionState) -> YuniKornKept:
    """The partition's `YuniKornKept`, empty the first time."""
    found = p.kept.model
    if not isinstance(found, YuniKornKept):
        found = p.kept.model = YuniKornKept()
    return found


def backlog(p: PartitionState, now: int, fresh: bool = False) -> Backlog:
    """The partition's backlog, filed up to date at `now` (built whole the first time); with
    `fresh`, for allocation: the changed tasks kept apart (`Backlog.refresh`)."""
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
        found.index = {node.name: index for index, node in enumerate(found.nodes)}
        found.first_fit = {}
        p.kept.nodes_touched = set()  # the fold notes the nodes it changes from now on
    return found.nodes


def first_fit(p: PartitionState) -> dict[Shape, int]:
    """Per ask shape, the first node (in `nodes_by_name`) that may have room for it: where the
    last search found room, or the first node the fold changed since, if earlier (room grows
    only where tasks leave or reservations go)."""
    nodes_by_name(p)
    found = kept(p)
    touched = p.kept.nodes_touched
    if touched:
        floor = min((found.index[name] for name in touched if name in found.index), default=len(found.index))
        for shape, at in found.first_fit.items():
            if at > floor:
                found.first_fit[shape] = floor
        touched.clear()
    return found.first_fit
