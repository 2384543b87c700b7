"""Fair sharing's arithmetic and switches: dominant resource shares (per mille of what the
parent could lend, divided by the weight; weight 0 is infinite), the sides two queues are
compared on, and where fair sharing is on. Figures computed by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from preemptd.events import ConfigError, parse_quantity
from preemptd.scheduling.kueue._config import parse_objects
from preemptd.scheduling.kueue._fair import NO_SHARE, Share, share, sides
from preemptd.scheduling.kueue._tree import QuotaTree

API = "kueue.x-k8s.io/v1beta2"
FLAVOR = {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "f"}}


def queue(name: str, cohort: str | None, weight: float = 1, **nominal: int) -> dict:
    resources = [{"name": r, "nominalQuota": n} for r, n in nominal.items()]
    spec = {
        "cohortName": cohort,
        "fairSharing": {"weight": weight},
        "resourceGroups": [{"coveredResources": list(nominal), "flavors": [{"name": "f", "resources": resources}]}],
    }
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, parent: str | None = None, annotations: dict | None = None, **nominal: int) -> dict:
    spec: dict = {"parentName": parent}
    if nominal:
        spec["resourceGroups"] = [
            {"coveredResources": list(nominal), "flavors": [{"name": "f", "resources": [{"name": r, "nominalQuota": n} for r, n in nominal.items()]}]}
        ]
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name, "annotations": annotations or {}}, "spec": spec}


def shares(objects: list[dict], used: dict[str, dict[str, int]]) -> tuple[QuotaTree, dict]:
    tree = QuotaTree(parse_objects([FLAVOR, *objects])[0])
    usage = tree.usage({q: {("f", r): parse_quantity(r, amount) for r, amount in u.items()} for q, u in used.items()})
    return tree, usage


def test_the_share_is_the_dominant_resource_borrowed_per_mille_of_what_the_cohort_lends() -> None:
    tree, usage = shares(
        [queue("a", "c", cpu=2, gpu=2), queue("b", "c", cpu=6, gpu=2)],
        {"a": {"cpu": 3, "gpu": 3}, "b": {"cpu": 1}},
    )
    # a borrows 1 of 8 cpu (125) and 1 of 4 gpu (250): gpu dominates
    assert share(tree, tree.queues["a"], usage) == Share(False, 250)
    assert share(tree, tree.queues["b"], usage) == NO_SHARE, "within its quota: 0"


def test_a_weight_divides_the_share_and_weight_zero_makes_any_borrowing_infinite() -> None:
    tree, usage = shares(
        [queue("heavy", "c", weight=2, cpu=0), queue("zero", "c", weight=0, cpu=0), queue("pool", "c", cpu=10)],
        {"heavy": {"cpu": 4}, "zero": {"cpu": 1}},
    )
    assert share(tree, tree.queues["heavy"], usage) == Share(False, 200), "400 per mille, halved"
    assert share(tree, tree.queues["zero"], usage) == Share(True, 100)
    assert Share(True, 100) > Share(False, 999_999), "infinite beats any finite share"
    assert Share(True, 100) < Share(True, 400), "two infinite shares compare unweighted"


def test_an_inner_cohort_is_lent_only_what_its_borrowing_limit_and_its_parent_allow() -> None:
    tree, usage = shares(
        [
            cohort("root", cpu=10),
            {
                **cohort("team", "root"),
                "spec": {
                    "parentName": "root",
                    "resourceGroups": [
                        {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 2, "borrowingLimit": 3}]}]}
                    ],
                },
            },
            queue("x", "team", cpu=0),
            queue("y", "root", cpu=0),
        ],
        {"x": {"cpu": 4}},
    )
    # team can use its own 2 plus at most 3 from root: x, borrowing 4, has 4 of 5 lendable
    assert tree.lendable(tree.cohorts["team"]) == {"cpu": 5000}
    assert share(tree, tree.queues["x"], usage) == Share(False, 800)
    # team borrows 2 of the 12 root could lend it
    assert share(tree, tree.cohorts["team"], usage) == Share(False, Fraction(500, 3))


def test_two_queues_are_compared_on_the_children_of_their_lowest_common_cohort() -> None:
    tree, _ = shares(
        [cohort("root"), cohort("left", "root"), cohort("right", "root"), queue("a", "left", cpu=1), queue("b", "right", cpu=1), queue("c", "left", cpu=1)], {}
    )
    q, c = tree.queues, tree.cohorts
    assert sides(q["a"], q["b"]) == (c["root"], c["left"], c["right"])
    assert sides(q["a"], q["c"]) == (c["left"], q["a"], q["c"])


def test_an_annotation_turns_fair_sharing_on_for_one_root_cohort_only() -> None:
    config, _ = parse_objects(
        [
            FLAVOR,
            cohort("fair", annotations={"preemptd.io/fair-sharing": "true"}),
            cohort("plain"),
            queue("a", "fair", cpu=1),
            queue("b", "plain", cpu=1),
            queue("alone", None, cpu=1),
        ]
    )
    assert config.fair_sharing_in("fair") and not config.fair_sharing_in("plain") and not config.fair_sharing_in("alone")
    everywhere, _ = parse_objects(
        [
            FLAVOR,
            {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}},
            cohort("plain"),
        ]
    )
    assert everywhere.fair_sharing_in("plain") and everywhere.fair_sharing_in("alone")


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        ([cohort("root"), cohort("inner", "root", annotations={"preemptd.io/fair-sharing": "true"})], "put it on the root cohort, not on one with parent root"),
        ([cohort("root", annotations={"preemptd.io/fair-sharing": "yes"})], 'must be "true" or "false", got \'yes\''),
    ],
)
def test_the_annotation_is_refused_off_a_root_cohort_or_with_another_value(objects: list[dict], reason: str) -> None:
    with pytest.raises(ConfigError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_objects([FLAVOR, *objects])


def test_what_a_cohort_lends_counts_every_flavor_of_the_tree() -> None:
    """An inner cohort's children may borrow flavors only found elsewhere in the tree: their
    share is against all of it (Kueue sums over the root's flavor-resources)."""
    two_flavors = [FLAVOR, {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "g"}}]
    on_g = {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": "z"},
        "spec": {
            "cohortName": "root",
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "g", "resources": [{"name": "cpu", "nominalQuota": 10}]}]}],
        },
    }
    tree = QuotaTree(parse_objects([*two_flavors, cohort("root"), cohort("team", "root"), queue("s", "team", cpu=4), on_g])[0])
    assert tree.lendable(tree.cohorts["team"]) == {"cpu": 14_000}, "4 in f of its own, 10 in g from root"
