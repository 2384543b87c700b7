"""What the YuniKorn model keeps of a partition between cycles, outside snapshots
(`PartitionState.kept`): made again from the state when absent."""

from __future__ import annotations

from dataclasses import dataclass

from preemptd.projections import PartitionState

from ._backlog import Backlog

__all__ = ["YuniKornKept", "backlog", "kept"]


@dataclass
class YuniKornKept:
    """`backlog`: the waiting tasks in the order cycles try them (dropped at a configuration
    change: queues, their delays and the tasks' order may change with it)."""

    backlog: Backlog | None = None


def kept(p: PartitionState) -> YuniKornKept:
    """The partition's `YuniKornKept`, empty the first time."""
    found = p.kept.model
    if not isinstance(found, YuniKornKept):
        found = p.kept.model = YuniKornKept()
    return found


def backlog(p: PartitionState, now: int) -> Backlog:
    """The partition's backlog, filed up to date at `now` (built whole the first time)."""
    found = kept(p)
    if found.backlog is None:
        found.backlog = Backlog(p)
    found.backlog.refresh(p, now)
    return found.backlog
