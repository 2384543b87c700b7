"""preemptd's extension of Kueue: a lowered quota enforced after the delay of the annotation
`preemptd.io/quota-preemption-delay` (scheduling/kueue/_quota.py)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import msgspec
import pytest

from preemptd.events import QuotaEnforced, Scenario
from preemptd.projections import PartitionState
from preemptd.scheduling import replay, simulate
from preemptd.scheduling.kueue._config import QUOTA_DELAY_ANNOTATION, parse_objects
from preemptd.scheduling.kueue._quota import over_in
from preemptd.scheduling.kueue._tree import QuotaTree
from preemptd.scheduling.kueue._workloads import Workloads

ROOT = Path(__file__).resolve().parent.parent
FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}


def load(path: Path) -> Scenario:
    return msgspec.yaml.decode(path.read_bytes(), type=Scenario)


def over_queues(p: PartitionState) -> dict[str, dict[tuple[str, str], int]]:
    """Per ClusterQueue, what it holds beyond what it may (every admitted workload counted)."""
    tree = QuotaTree(p.settings)
    usage = tree.usage(Workloads.of(p).usage)
    return {node.name: over for root in tree.roots() for node, over in over_in(tree, root, usage).items()}


def queue(
    name: str, nominal: int, *, delay: str | None = None, cohort: str | None = None, borrowing: int | None = None, lending: int | None = None
) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": "cpu", "nominalQuota": nominal}
    if borrowing is not None:
        quota["borrowingLimit"] = borrowing
    if lending is not None:
        quota["lendingLimit"] = lending
    metadata: dict[str, Any] = {"name": name}
    if delay is not None:
        metadata["annotations"] = {QUOTA_DELAY_ANNOTATION: delay}
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [quota]}]}]}
    if cohort is not None:
        spec["cohortName"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": metadata, "spec": spec}


def test_the_annotation_is_read_and_checked() -> None:
    config, _ = parse_objects([FLAVOR, queue("a", 4, delay="1m30s"), queue("b", 4)])
    assert config.cluster_queues["a"].quota_preemption_delay == 90_000
    assert config.cluster_queues["b"].quota_preemption_delay == 0
    with pytest.raises(Exception, match="quota-preemption-delay"):
        parse_objects([FLAVOR, queue("a", 4, delay="soon")])
    with pytest.raises(Exception, match="never\\) or more"):
        parse_objects([FLAVOR, queue("a", 4, delay="-5s")])


@pytest.mark.parametrize("name", ["quota-enforcement", "quota-enforcement-cohort"])
def test_after_enforcement_every_annotated_queue_is_within_its_limit(name: str) -> None:
    scenario = load(ROOT / f"examples/kueue/{name}.yaml")
    result = simulate(scenario)
    p = result.state.partitions["default"]
    over = over_queues(p)
    enforced = {d.queue for d in result.decisions if isinstance(d, QuotaEnforced)}
    assert enforced and not over.keys() & enforced
    assert set(over) == ({"team-b"} if name == "quota-enforcement" else set())  # the switch off: as in Kueue


def test_nothing_to_evict_is_said_once() -> None:
    """The shim never binds: admitted workloads have no running pod, so none can be evicted."""
    raw = msgspec.yaml.decode((ROOT / "examples/kueue/quota-enforcement.yaml").read_bytes())
    raw["shim"] = {"execute": False}
    raw.pop("expect")
    result = simulate(msgspec.convert(raw, type=Scenario))
    [enforced] = [d for d in result.decisions if isinstance(d, QuotaEnforced)]
    assert enforced.queue == "team-a" and enforced.victims == () and dict(enforced.short or {}) == dict(enforced.target)
    assert any("has all its pods running" in line for line in enforced.explanation)


def _random_scenario(rng: random.Random) -> dict[str, Any]:
    """A cohort of two to four queues, some annotated, workloads admitted, then every quota and
    limit changed at random at 10 s."""
    names = [f"q{i}" for i in range(rng.randint(2, 4))]

    def queues() -> list[dict[str, Any]]:
        made = []
        for name in names:
            nominal = rng.randint(0, 8)
            made.append(
                queue(
                    name,
                    nominal,
                    delay=rng.choice([None, "5s", "0s"]),
                    cohort="c",
                    borrowing=rng.choice([None, rng.randint(0, 8)]),
                    lending=rng.choice([None, rng.randint(0, nominal)]),
                )
            )
        return made

    events: list[dict[str, Any]] = [{"type": "node.upserted", "node": "n", "capacity": {"cpu": 1000}}]
    for i in range(rng.randint(4, 12)):
        events.append(
            {
                "type": "task.submitted",
                "task": f"w{i}",
                "app": f"w{i}",
                "queue": rng.choice(names),
                "priority": rng.randint(0, 2),
                "resources": {"cpu": rng.randint(1, 3)},
            }
        )
    events.append({"at": "10s", "type": "config.applied", "model": "kueue", "config": [FLAVOR, *queues()]})
    return {"name": "random", "model": "kueue", "config": [FLAVOR, *queues()], "events": events, "until": "30s", "shim": {"grace_period": "1s"}}


@pytest.mark.parametrize("seed", range(40))
def test_a_random_lowered_quota_is_enforced_and_replays(seed: int) -> None:
    """Property: once every delay has run out, a timer is left only when its enforcement could
    not shed enough; after an enforcement that could, the cohort tree is within its quotas
    (every admitted workload counted); the log replays to the same decisions."""
    result = simulate(msgspec.convert(_random_scenario(random.Random(seed)), type=Scenario))
    p = result.state.partitions["default"]
    state = p.model_state
    assert all(state.quota.short.get(name) for name in state.quota.timers), "a timer left only when its enforcement was short"
    if any(isinstance(d, QuotaEnforced) and d.short is None for d in result.decisions):
        assert over_queues(p) == {}
    report = replay(result.records, log_id="sim")
    assert report.divergence is None and report.reproduced == len(result.decisions)


def test_the_lowered_queue_gives_back_first_and_each_victim_names_the_cut() -> None:
    """training's nominalQuota is cut from 8 to 4 GPUs while batch borrows what inference leaves
    idle: training sheds its own four newest workloads, batch keeps what it borrowed, and each
    victim's why says which quota was lowered, from what to what."""
    result = simulate(load(ROOT / "examples" / "kueue" / "quota-enforcement-lowered-queue-first.yaml"))
    (enforced,) = [d for d in result.decisions if isinstance(d, QuotaEnforced)]
    assert {victim.queue for victim in enforced.victims} == {"training"}
    assert all("ClusterQueue training's nominalQuota of nvidia.com/gpu in a100 was lowered from 8 to 4" in victim.why for victim in enforced.victims)


@pytest.mark.parametrize("seed", range(40))
def test_other_queues_give_back_only_after_the_lowered_queue(seed: int) -> None:
    """Property: in an enforcement, the lowered queue's own victims come before any other
    queue's (old: other ClusterQueues first, as a preemptor's candidates)."""
    result = simulate(msgspec.convert(_random_scenario(random.Random(seed)), type=Scenario))
    for decision in result.decisions:
        if isinstance(decision, QuotaEnforced) and decision.victims:
            queues = [victim.queue for victim in decision.victims]
            own = [queue == decision.queue for queue in queues]
            assert own == sorted(own, reverse=True), f"another queue's victim before {decision.queue}'s own: {queues}"
