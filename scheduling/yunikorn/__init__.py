"""The YuniKorn model: hierarchical queues with guarantees and maxes, allocation by queue
priority and fairness, and preemption by YuniKorn's seven laws with fences, delays, priority
offsets, opt-outs, required-node (DaemonSet) preemption and node reservations.

- `_config`: YuniKorn's `queues.yaml`, with its queue properties and partition settings.
- `_cycle`: the cycle's three phases (reservations, allocation, preemption) and pace control.
- `_ordering`: the order pending tasks are tried in; priorities through offsets and fences.
- `_placement`: whether a task fits a node and its queues' maxes, and first-fit node choice.
- `_preemption`: the victim search by the seven laws, and DaemonSet preemption.

README.md beside this file describes the model for users, and where it departs from YuniKorn.
"""

from preemptd.projections import PartitionState

from .._explain import listing
from .._model import Model, counted
from ._config import (
    DEFAULT_PREEMPTION_DELAY_MS as DEFAULT_PREEMPTION_DELAY_MS,
    PreemptionSettings as PreemptionSettings,
    QueueProps as QueueProps,
    claims,
    configured_partitions,
    parse_config as parse_config,
)
from ._cycle import (
    PLACEMENTS_PER_CYCLE as PLACEMENTS_PER_CYCLE,
    PREEMPTIONS_PER_CYCLE as PREEMPTIONS_PER_CYCLE,
    next_wakeup,
    schedule,
)


def describe(partition: PartitionState) -> str:
    """The queues, the partition's preemption switch and pace, and the fences and opt-outs."""
    settings: PreemptionSettings = partition.settings
    leaves = sum(queue.leaf for queue in partition.queues.values())
    line = f"yunikorn: {counted(len(partition.queues), 'queue')} ({counted(leaves, 'leaf', 'leaves')}); "
    if not settings.enabled:
        return line + "preemption off (partition preemption.enabled: false): nothing will be preempted"
    line += f"preemption on, at most {settings.max_victims_per_cycle} victims and {settings.max_share_per_cycle:.0%} of the cluster a cycle"
    for policy in ("fence", "disabled"):
        queues = [path for path, queue in partition.queues.items() if queue.props.preemption_policy == policy]
        if queues:
            line += f"; preemption.policy {policy}: {listing(queues)}"
    return line


MODEL = Model(
    name="yunikorn",
    parse_config=parse_config,
    schedule=schedule,
    next_wakeup=next_wakeup,
    partitions=configured_partitions,
    claims=claims,
    describe=describe,
)
