"""Workloads as the Kueue model sees a partition: each application is one workload, its tasks
its pods, its request their sum. A workload is admitted once a `decision.admitted` gave it a
flavor per resource (or, arriving already running, once the model recorded it so), pending
while it has tasks and no admission."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from preemptd.projections import PartitionState

from ._state import admission_of, preempting
from ._tree import FlavorResource

__all__ = ["Workload", "Workloads", "usage_of"]


@dataclass(frozen=True, eq=False)
class Workload:
    """`seq` is its creation (the log position of its submission), `admitted_at` the cycle
    that admitted it; `running` says whether the cluster runs any of its pods."""

    id: str
    queue: str
    priority: int
    seq: int
    request: dict[str, int]
    first_task: str
    flavors: dict[str, str] | None
    admitted_at: int
    evicted: bool
    preempting: bool
    running: bool

    @cached_property  # read for every candidate of every preemption
    def usage(self) -> dict[FlavorResource, int]:
        """What an admitted workload holds, per flavor-resource."""
        return usage_of(self.flavors or {}, self.request)


def usage_of(flavors: Mapping[str, str], request: Mapping[str, int]) -> dict[FlavorResource, int]:
    """`request` per flavor-resource, for the resources `flavors` assigns."""
    return {(flavors[r], r): amount for r, amount in request.items() if r in flavors}


@dataclass
class Workloads:
    """The partition's workloads: pending ones in Kueue's order (priority, then creation),
    admitted ones by ClusterQueue, and each ClusterQueue's usage."""

    pending: list[Workload]
    admitted: dict[str, list[Workload]]
    usage: dict[str, dict[FlavorResource, int]]

    @classmethod
    def of(cls, p: PartitionState) -> Workloads:
        pending: list[Workload] = []
        admitted: dict[str, list[Workload]] = {}
        usage: dict[str, dict[FlavorResource, int]] = {}
        for app in p.apps.values():
            if not app.tasks:
                continue
            tasks = [p.tasks[t] for t in app.tasks]
            request: dict[str, int] = {}
            for task in tasks:
                for name, amount in task.resources.items():
                    request[name] = request.get(name, 0) + amount
            admission = admission_of(p, app)
            workload = Workload(
                id=app.id,
                queue=app.queue,
                priority=max(task.priority for task in tasks),
                seq=app.seq,
                request=request,
                first_task=tasks[0].id,
                flavors=admission.flavors if admission is not None else None,
                admitted_at=admission.cycle if admission is not None else 0,
                evicted=admission is not None and admission.evicted,
                preempting=preempting(p, app),
                running=any(task.status != "pending" for task in tasks),
            )
            if admission is None:
                pending.append(workload)
                continue
            admitted.setdefault(app.queue, []).append(workload)
            used = usage.setdefault(app.queue, {})
            for fr, amount in workload.usage.items():
                used[fr] = used.get(fr, 0) + amount
        pending.sort(key=lambda w: (-w.priority, w.seq))
        return cls(pending, admitted, usage)
