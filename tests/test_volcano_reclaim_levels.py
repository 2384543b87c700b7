"""Capacity's hierarchical reclaim against Volcano's own cases
(`pkg/scheduler/plugins/capacity/capacity_test.go`, `Test_capacityPlugin_AncestorReclaimScenarios`,
v1.16): a victim's ancestors up to `ancestorReclaimLevel` are checked against what they
deserve, but not one that is the reclaimer's own at the same level (nor root); and a victim
whose queue deserves none of what it uses is spared when it shares an ancestor within the level
with a reclaimer whose queue deserves none of what it asks ("no real contention").

Each case: the queue tree (name: parent, deserved, capability), the level, the node, the tasks
running (queue, resources, priority, preemptable) and the one waiting; then who is evicted.
Volcano's tests set the reclaimer's PodGroup Inqueue; here there is no enqueue action."""

from __future__ import annotations

import msgspec
import pytest

from preemptd.events import Preempted, Scenario
from preemptd.scheduling import simulate

T = {"cpu": 1, "memory": "1Gi", "a100": 1, "rdma/hca": 1}  # the project tree's pods
BIG = {"cpu": 2, "memory": "2Gi"}  # the level tree's pods
LEVEL_TREE = {
    "grand-a": (None, {"cpu": 2, "memory": "2Gi"}, {"cpu": 4, "memory": "4Gi"}),
    "parent-a": ("grand-a", {"cpu": 2, "memory": "2Gi"}, {"cpu": 2, "memory": "2Gi"}),
    "queue-a": ("parent-a", {"cpu": 2, "memory": "2Gi"}, {"cpu": 2, "memory": "2Gi"}),
    "grand-b": (None, {"cpu": 3, "memory": "3Gi"}, {"cpu": 4, "memory": "4Gi"}),
    "parent-b": ("grand-b", {"cpu": 1, "memory": "1Gi"}, {"cpu": 2, "memory": "2Gi"}),
    "queue-b": ("parent-b", {"cpu": 1, "memory": "1Gi"}, {"cpu": 2, "memory": "2Gi"}),
}
PROJECT_TREE = {
    "project1-root": (None, {"a100": 1}, {"a100": 2}),
    "project1-non-preemptable": ("project1-root", {"a100": 1}, {"a100": 1}),
    "project1-preemptable": ("project1-root", None, None),
    "project2-root": (None, {"a100": 3}, {"a100": 4}),
    "project2-non-preemptable": ("project2-root", {"a100": 3}, {"a100": 3}),
    "project2-preemptable": ("project2-root", None, None),
}
NODE_2 = {"cpu": 2, "memory": "2Gi"}
NODE_16 = {"cpu": 16, "memory": "16Gi", "a100": 4, "rdma/hca": 4}

CASES = {
    # case: (tree, level, node, running [(task, queue, resources, priority, preemptable)], waiting (task, queue, resources, priority), evicted)
    "1: a victim's level-1 ancestor is root: not checked": (
        {"q1": (None, {"a100": 1}, None), "q11": ("q1", None, None), "q2": (None, None, None)},
        1,
        NODE_16,
        [("p1", "q2", {"cpu": 1, "memory": "1Gi", "a100": 4, "rdma/hca": 1}, 0, True)],
        ("p2", "q11", {"a100": 1}, 0),
        ["p1"],
    ),
    "2: the lower priority goes, then its ancestor holds what it deserves": (
        PROJECT_TREE,
        1,
        NODE_16,
        [("p1", "project2-preemptable", T, 2, True), ("p2", "project2-preemptable", T, 2, True), ("p3", "project2-preemptable", T, 2, True)]
        + [("p4", "project2-preemptable", T, 1, True)],
        ("p5", "project1-preemptable", T, 0),
        ["p4"],
    ),
    "3: a sibling under the reclaimer's own parent: the parent is not checked": (
        PROJECT_TREE,
        1,
        NODE_16,
        [("p1", "project2-preemptable", T, 2, True), ("p2", "project2-preemptable", T, 2, True), ("p3", "project2-preemptable", T, 2, True)]
        + [("p5", "project1-preemptable", T, 0, True)],
        ("p6", "project2-non-preemptable", T, 2),
        ["p3"],
    ),
    "4: a victim's queue within what it deserves": (
        {
            "parent1": (None, {"a100": 1}, None),
            "child1": ("parent1", {"a100": 1}, None),
            "child1-sibling": ("parent1", None, None),
            "parent2": (None, {"a100": 1}, None),
            "child2": ("parent2", {"a100": 1}, None),
        },
        1,
        {"cpu": 8, "memory": "8Gi", "a100": 1, "rdma/hca": 4},
        [("p1", "child1", T, 0, True), ("p3", "child1-sibling", T, 0, False)],
        ("p2", "child2", T, 0),
        [],
    ),
    "5: level 0 checks the victim's queue only": (LEVEL_TREE, 0, NODE_2, [("victim", "queue-b", BIG, 0, True)], ("reclaimer", "queue-a", BIG, 0), ["victim"]),
    "6: level 1 checks parent-b, above what it deserves": (
        LEVEL_TREE,
        1,
        NODE_2,
        [("victim", "queue-b", BIG, 0, True)],
        ("reclaimer", "queue-a", BIG, 0),
        ["victim"],
    ),
    "7: level 2 checks grand-b, within what it deserves": (LEVEL_TREE, 2, NODE_2, [("victim", "queue-b", BIG, 0, True)], ("reclaimer", "queue-a", BIG, 0), []),
    "8: no real contention under a shared parent": (
        {"parent": (None, {"cpu": 4, "memory": "4Gi"}, {"cpu": 4, "memory": "4Gi"}), "queue-a": ("parent", None, None), "queue-b": ("parent", None, None)},
        1,
        NODE_2,
        [("victim", "queue-b", BIG, 0, True)],
        ("reclaimer", "queue-a", BIG, 0),
        [],
    ),
    "9: the reclaimer may not reclaim: its grandparent would hold more than it deserves": (
        {
            "grand": (None, {"cpu": 2, "memory": "2Gi"}, {"cpu": 2, "memory": "2Gi"}),
            "parent-a": ("grand", None, None),
            "queue-a": ("parent-a", None, None),
            "parent-b": ("grand", None, None),
            "queue-b": ("parent-b", None, None),
        },
        2,
        NODE_2,
        [("victim", "queue-b", BIG, 0, True)],
        ("reclaimer", "queue-a", BIG, 0),
        [],
    ),
    "10: a shallow reclaimer and a deep victim under one grandparent": (
        {
            "grand": (None, {"cpu": 1, "memory": "1Gi"}, {"cpu": 2, "memory": "2Gi"}),
            "parent-deep": ("grand", {"cpu": 1, "memory": "1Gi"}, {"cpu": 2, "memory": "2Gi"}),
            "queue-deep": ("parent-deep", None, None),
            "queue-shallow": ("grand", None, None),
        },
        2,
        NODE_2,
        [("victim", "queue-deep", BIG, 0, True)],
        ("reclaimer", "queue-shallow", BIG, 0),
        [],
    ),
    "11: levels are compared from each leaf: the deep victim's grandparent is checked": (
        {
            "shallow-parent": (None, {"a100": 1}, None),
            "queue-shallow": ("shallow-parent", {"a100": 1}, None),
            "deep-grand": (None, {"a100": 2}, None),
            "deep-parent": ("deep-grand", {"a100": 1}, None),
            "queue-deep": ("deep-parent", {"a100": 1}, None),
        },
        2,
        {"cpu": 4, "memory": "4Gi", "a100": 2},
        [("victim", "queue-deep", {"cpu": 1, "memory": "1Gi", "a100": 2}, 0, True)],
        ("reclaimer", "queue-shallow", {"a100": 1}, 0),
        [],
    ),
    # not one of Volcano's cases: under hierarchy a queue deserves its spec.deserved even beyond
    # what the cluster holds (capacity.go checkHierarchicalQueue caps only the real capability)
    "parent deserves more than the cluster: x reclaims from its sibling in its parent's name": (
        {"parent": (None, {"cpu": 4}, {"cpu": 4}), "x": ("parent", None, None), "y": ("parent", {"cpu": 1}, None)},
        1,
        NODE_2,
        [("y-0", "y", {"cpu": 1}, 0, True), ("y-1", "y", {"cpu": 1}, 0, True)],
        ("x-0", "x", {"cpu": 1}, 0),
        ["y-1"],
    ),
}


def scenario(tree: dict, level: int, node: dict, running: list, waiting: tuple) -> Scenario:
    queues = []
    for name, (parent, deserved, capability) in tree.items():
        spec = {key: value for key, value in (("parent", parent), ("deserved", deserved), ("capability", capability)) if value is not None}
        queues.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec})
    capacity = {"name": "capacity", "enableHierarchy": True, "arguments": {"ancestorReclaimLevel": level}}
    conf = {
        "actions": "allocate, reclaim",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False, "enableReclaimable": False}, capacity, {"name": "predicates"}]}
        ],
    }
    events: list[dict] = [{"type": "node.upserted", "node": "n1", "capacity": {**node, "pods": 110}}]
    for task, queue, resources, priority, preemptable in running:
        events.append({"type": "app.submitted", "app": task, "queue": queue, "priority": priority, "min_available": 1})
        events.append({"type": "task.bound", "task": task, "app": task, "node": "n1", "resources": resources, "preemptable": preemptable})
    task, queue, resources, priority = waiting
    events.append({"at": "1s", "type": "app.submitted", "app": task, "queue": queue, "priority": priority, "min_available": 1})
    events.append({"at": "1s", "type": "task.submitted", "task": task, "app": task, "resources": resources})
    return msgspec.convert({"name": "case", "model": "volcano", "config": [*queues, conf], "events": events, "until": "5s"}, Scenario)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_capacity_reclaims_as_volcano_under_ancestor_reclaim_level(case: str) -> None:
    tree, level, node, running, waiting, evicted = CASES[case]
    decisions = simulate(scenario(tree, level, node, running, waiting)).decisions
    victims = [victim.task for d in decisions if isinstance(d, Preempted) for victim in d.victims]
    assert victims == evicted
