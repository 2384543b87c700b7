"""Leaves where a phase of the cycle has nothing to do until something changes, kept between
cycles, so that a cycle visits the leaves where something changed, not every leaf with tasks
waiting (ten thousand tenants with a little waiting each cost what one does).

A leaf is settled in a phase when its last visit found every waiting task refused for a reason
that holds until the usage of one of its queues changes: in allocation, a queue max on its
lineage that every ask would exceed; in preemption, a refusal of the task's scope (law 4, a max,
a fence) told to every task already. The reason names the queues it depends on (`on`: a queue's
usage covers every queue below it, so the highest one consulted is enough; none for a reason of
the configuration alone). The fold says which leaves it changed (`Kept.touched`): such a leaf,
and every leaf whose reason depends on a queue above it, is visited again.

A settled leaf is exactly a leaf whose visit would decide nothing: passing over it changes no
decision (`test_yunikorn_backlog.py` compares every scenario with the whole scan).
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from preemptd.projections import PartitionState

__all__ = ["Settled"]


class Settled:
    """The leaves settled in one phase, and the leaves with tasks waiting that are not."""

    __slots__ = ("dependents", "leaves", "unsettled")

    def __init__(self, waiting: Iterable[str]) -> None:
        self.leaves: dict[str, tuple[str, ...]] = {}  # settled leaf -> the queues its reason depends on
        self.dependents: dict[str, set[str]] = {}  # queue -> the settled leaves whose reason depends on it
        self.unsettled: set[str] = set(waiting)  # leaves that may have tasks waiting and are not settled

    def settle(self, leaf: str, on: tuple[str, ...]) -> None:
        """Nothing to do in `leaf` until the usage of a queue of `on` changes."""
        self.leaves[leaf] = on
        self.unsettled.discard(leaf)
        for queue in on:
            self.dependents.setdefault(queue, set()).add(leaf)

    def unsettle(self, leaf: str) -> None:
        """Visit `leaf` again (if tasks wait there)."""
        on = self.leaves.pop(leaf, None)
        self.unsettled.add(leaf)
        for queue in on or ():
            dependents = self.dependents.get(queue)
            if dependents is not None:
                dependents.discard(leaf)

    def changed(self, p: PartitionState, leaves: Iterable[str]) -> None:
        """The fold changed what `leaves` hold or wait for: they, and the leaves whose reason
        depends on a queue above one of them, are visited again."""
        for leaf in leaves:
            self.unsettle(leaf)
            queue = p.queues.get(leaf)
            for path in queue.lineage if queue is not None else ():
                for dependent in self.dependents.pop(path, ()):
                    if dependent in self.leaves:
                        self.unsettle(dependent)

    def live(self, waiting: Container[str]) -> list[str]:
        """The leaves with tasks waiting that a phase visits (unsettled ones whose tasks left
        are let go of here)."""
        gone = [leaf for leaf in self.unsettled if leaf not in waiting]
        self.unsettled.difference_update(gone)
        return list(self.unsettled)
