"""Flavor assignment: the flavors of a resource group tried in order, fit, borrowing and
preemption told apart, and flavorFungibility deciding when the search stops."""

from __future__ import annotations

import pytest

from preemptd.scheduling.kueue._assign import Mode, assign
from preemptd.scheduling.kueue._config import parse_objects
from preemptd.scheduling.kueue._tree import QuotaTree


def setup(queues: dict[str, dict], fungibility: dict | None = None):
    """ClusterQueues by name: {cohort, on-demand, spot} (cores); the first gets `fungibility`."""
    made: list[dict] = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": f}} for f in ("on-demand", "spot")]
    for number, (name, spec) in enumerate(queues.items()):
        flavors = [{"name": f, "resources": [{"name": "cpu", "nominalQuota": spec[f]}]} for f in ("on-demand", "spot")]
        made.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": name},
                "spec": {
                    "cohortName": spec.get("cohort"),
                    "resourceGroups": [{"coveredResources": ["cpu"], "flavors": flavors}],
                    **({"flavorFungibility": fungibility} if fungibility and number == 0 else {}),
                },
            }
        )
    config, _ = parse_objects(made)
    return config, QuotaTree(config)


def try_to_admit(config, tree: QuotaTree, queue: str, cores: int, used: dict[str, dict[str, int]] | None = None):
    usage = tree.usage({q: {(f, "cpu"): amount * 1000 for f, amount in flavors.items()} for q, flavors in (used or {}).items()})
    return assign(config.cluster_queues[queue], tree.queues[queue], tree, usage, {"cpu": cores * 1000})


def test_the_first_flavor_with_room_is_taken_and_the_others_say_why_not() -> None:
    config, tree = setup({"a": {"on-demand": 4, "spot": 8}})
    taken = try_to_admit(config, tree, "a", 6)
    assert (taken.flavors, taken.mode, taken.borrows) == ({"cpu": "spot"}, Mode.FIT, False)
    assert taken.passed_over == ("flavor on-demand: 6 cpu is more than ClusterQueue a can ever have (4)",)


@pytest.mark.parametrize(("when_can_preempt", "flavor", "mode"), [("TryNextFlavor", "spot", Mode.FIT), ("MayStopSearch", "on-demand", Mode.PREEMPT)])
def test_a_flavor_that_needs_preemption_is_kept_only_if_no_later_one_fits_unless_told_to_stop(when_can_preempt: str, flavor: str, mode: Mode) -> None:
    config, tree = setup({"a": {"on-demand": 4, "spot": 8}}, {"whenCanPreempt": when_can_preempt})
    taken = try_to_admit(config, tree, "a", 2, used={"a": {"on-demand": 3}})
    assert (taken.flavors, taken.mode) == ({"cpu": flavor}, mode)
    assert taken.contested == ((("on-demand", "cpu"),) if mode == Mode.PREEMPT else ())


@pytest.mark.parametrize(("when_can_borrow", "flavor", "borrows"), [("MayStopSearch", "on-demand", True), ("TryNextFlavor", "spot", False)])
def test_borrowing_stops_the_search_unless_the_queue_would_rather_try_the_next_flavor(when_can_borrow: str, flavor: str, borrows: bool) -> None:
    config, tree = setup(
        {"a": {"cohort": "c", "on-demand": 4, "spot": 8}, "b": {"cohort": "c", "on-demand": 10, "spot": 0}}, {"whenCanBorrow": when_can_borrow}
    )
    taken = try_to_admit(config, tree, "a", 6)
    assert (taken.flavors, taken.mode, taken.borrows) == ({"cpu": flavor}, Mode.FIT, borrows)


def test_with_every_flavor_needing_preemption_the_first_is_kept() -> None:
    config, tree = setup({"a": {"on-demand": 4, "spot": 4}})
    taken = try_to_admit(config, tree, "a", 3, used={"a": {"on-demand": 2, "spot": 2}})
    assert (taken.flavors, taken.mode, taken.contested) == ({"cpu": "on-demand"}, Mode.PREEMPT, (("on-demand", "cpu"),))


def test_a_resource_the_queue_has_no_quota_for_never_fits() -> None:
    config, tree = setup({"a": {"on-demand": 4, "spot": 4}})
    taken = assign(config.cluster_queues["a"], tree.queues["a"], tree, tree.usage({}), {"cpu": 1000, "nvidia.com/gpu": 1})
    assert taken.mode == Mode.NO_FIT
    assert taken.passed_over == ("ClusterQueue a has no quota for nvidia.com/gpu",)
