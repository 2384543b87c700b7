"""The quota tree: subtree quotas, lending and borrowing limits, cohort usage and what each
ClusterQueue has available, in cohorts nested three levels deep. Figures computed by hand."""

from __future__ import annotations

from preemptd.scheduling.kueue._config import KueueConfig, parse_objects
from preemptd.scheduling.kueue._tree import QuotaTree

CPU = ("default", "cpu")


def objects(*spec: tuple[str, str, str | None, dict]) -> KueueConfig:
    """(kind, name, parent, cpu quota) each; cpu in cores."""
    made: list[dict] = [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    for kind, name, parent, cpu in spec:
        groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", **cpu}]}]}] if cpu else []
        key = "cohortName" if kind == "ClusterQueue" else "parentName"
        made.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": name}, "spec": {key: parent, "resourceGroups": groups}})
    config, _ = parse_objects(made)
    return config


def cores(**used: int) -> dict[str, dict]:
    return {queue: {CPU: amount * 1000} for queue, amount in used.items()}


def test_a_queue_can_borrow_what_others_in_its_cohort_do_not_use() -> None:
    tree = QuotaTree(objects(("ClusterQueue", "a", "c", {"nominalQuota": 10}), ("ClusterQueue", "b", "c", {"nominalQuota": 10})))
    assert tree.cohorts["c"].subtree == {CPU: 20_000}
    usage = tree.usage(cores(a=0, b=15))
    assert usage[tree.cohorts["c"]] == {CPU: 15_000}
    assert tree.available(tree.queues["a"], CPU, usage) == 5_000, "b borrowed 5 of a's 10: a gets them back only by preemption"
    assert tree.available(tree.queues["b"], CPU, usage) == 5_000
    assert not tree.within_nominal(tree.queues["b"], CPU, usage) and tree.within_nominal(tree.queues["a"], CPU, usage)


def test_a_lending_limit_keeps_the_rest_local_and_a_borrowing_limit_caps_what_comes_from_the_cohort() -> None:
    tree = QuotaTree(
        objects(
            ("ClusterQueue", "a", "c", {"nominalQuota": 10, "lendingLimit": 4}),
            ("ClusterQueue", "b", "c", {"nominalQuota": 10, "borrowingLimit": 2}),
        )
    )
    assert tree.queues["a"].local(CPU) == 6_000
    assert tree.cohorts["c"].subtree == {CPU: 14_000}, "a lends 4, b all its 10"
    usage = tree.usage(cores(a=0, b=12))
    assert usage[tree.cohorts["c"]] == {CPU: 12_000}
    assert tree.available(tree.queues["a"], CPU, usage) == 6_000 + 2_000, "its local 6 and what the cohort has left"
    assert tree.available(tree.queues["b"], CPU, usage) == 0, "borrowed 2 of a's: its limit"
    assert tree.available(tree.queues["b"], CPU, tree.usage(cores(a=0, b=10))) == 2_000


def test_three_levels_of_cohorts_add_up() -> None:
    tree = QuotaTree(
        objects(
            ("Cohort", "root", None, {"nominalQuota": 5}),
            ("Cohort", "mid", "root", {}),
            ("Cohort", "leaf", "mid", {"nominalQuota": 1, "lendingLimit": 0, "borrowingLimit": 0}),
            ("ClusterQueue", "x", "leaf", {"nominalQuota": 10}),
            ("ClusterQueue", "y", "leaf", {"nominalQuota": 0}),
            ("ClusterQueue", "z", "root", {"nominalQuota": 10}),
        )
    )
    assert tree.cohorts["leaf"].subtree == {CPU: 11_000}
    assert tree.cohorts["leaf"].local(CPU) == 11_000, "lends nothing: all of it stays in the leaf cohort"
    assert tree.cohorts["mid"].subtree == {CPU: 0} and tree.cohorts["root"].subtree == {CPU: 15_000}
    usage = tree.usage(cores(x=10, y=1, z=2))
    assert usage[tree.cohorts["leaf"]] == {CPU: 11_000} and usage[tree.cohorts["root"]] == {CPU: 2_000}
    assert tree.available(tree.queues["y"], CPU, usage) == 0, "the leaf cohort's 11 are used, and it may borrow nothing"
    assert tree.available(tree.queues["z"], CPU, usage) == 13_000


def test_cohorts_in_a_cycle_and_their_queues_are_left_out() -> None:
    tree = QuotaTree(
        objects(
            ("Cohort", "a", "b", {}),
            ("Cohort", "b", "a", {}),
            ("ClusterQueue", "q", "a", {"nominalQuota": 1}),
            ("ClusterQueue", "r", None, {"nominalQuota": 1}),
        )
    )
    assert list(tree.cohorts) == [] and list(tree.queues) == ["r"]
    assert tree.available(tree.queues["r"], CPU, tree.usage(cores(r=0))) == 1_000


def test_without_a_borrowing_limit_a_nested_queue_borrows_from_the_root() -> None:
    tree = QuotaTree(
        objects(
            ("Cohort", "root", None, {"nominalQuota": 5}),
            ("Cohort", "leaf", "root", {"nominalQuota": 1, "lendingLimit": 0}),
            ("ClusterQueue", "y", "leaf", {"nominalQuota": 0}),
        )
    )
    assert tree.available(tree.queues["y"], CPU, tree.usage(cores(y=1))) == 5_000, "the leaf's own 1 used; the root's 5 free"
