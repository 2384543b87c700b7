"""Quota enforcement through preemption (YuniKorn's quota preemptor): the rules are scenarios
(examples/quota/*.yaml, examples/quota-enforcement.yaml); here the invariants over
generated trees, tasks and cuts of a max: an enforcement never sheds more than the queue was
over; once enforced, no queue stays over its max unless a decision says how much (`short`);
no queue goes below its guaranteed because of it; replay reproduces every decision."""

from __future__ import annotations

import msgspec
from conftest import ROOT, preemptd
from hypothesis import given, settings, strategies as st

from preemptd.events import QuotaEnforced, Scenario
from preemptd.scheduling import replay, simulate

LEAVES = ("x", "y")


@st.composite
def cuts(draw: st.DrawFn) -> dict:
    """A parent `team` of two leaves with guarantees, tasks of 1 to 4 cores, and at 10 s a cut of
    the parent's max, or of one leaf's, to somewhere between its guarantee and its usage."""
    guaranteed = {leaf: draw(st.integers(0, 4)) for leaf in LEAVES}
    tasks = {leaf: draw(st.lists(st.integers(1, 4), min_size=1, max_size=5)) for leaf in LEAVES}
    used = {leaf: sum(sizes) for leaf, sizes in tasks.items()}
    cut_parent = draw(st.booleans())
    if cut_parent:
        floor = sum(guaranteed.values())
        new_max = draw(st.integers(floor, max(floor, sum(used.values()))))
    else:
        leaf = draw(st.sampled_from(LEAVES))
        new_max = draw(st.integers(guaranteed[leaf], max(guaranteed[leaf], used[leaf])))

    def config(lowered: bool) -> dict:
        leaves = []
        for name in LEAVES:
            resources: dict = {"guaranteed": {"vcore": guaranteed[name]}}
            if lowered and not cut_parent and name == leaf:
                resources["max"] = {"vcore": new_max}
            leaves.append({"name": name, "resources": resources, "properties": {"quota.preemption.delay": "5s"}})
        team: dict = {"name": "team", "properties": {"quota.preemption.delay": "5s"}, "queues": leaves}
        if lowered and cut_parent:
            team["resources"] = {"max": {"vcore": new_max}}
        return {"preemption": {"quotapreemptionenabled": True}, "queues": [{"name": "root", "queues": [team]}]}

    events: list[dict] = [{"type": "node.upserted", "node": "n1", "capacity": {"vcore": 64}}]
    for name, sizes in tasks.items():
        events += [
            {"type": "task.submitted", "task": f"{name}-{i}", "app": name, "queue": f"root.team.{name}", "resources": {"vcore": size}}
            for i, size in enumerate(sizes)
        ]
    events.append({"at": "10s", "type": "config.applied", "config": config(lowered=True)})
    return {"name": "cut", "config": config(lowered=False), "events": events, "until": "40s"}


@settings(max_examples=60, deadline=None)
@given(scenario=cuts())
def test_a_cut_max_is_met_or_said_short_never_past_it_nor_below_a_guarantee_and_replays(scenario: dict) -> None:
    result = simulate(msgspec.convert(scenario, Scenario))
    p = result.state.partitions["default"]
    enforced = [d for d in result.decisions if isinstance(d, QuotaEnforced)]
    for decision in enforced:
        shed = sum(victim.resources.get("vcore", 0) for victim in decision.victims)
        assert shed <= decision.target.get("vcore", 0), f"{decision.queue} shed {shed} m, more than its target {dict(decision.target)}"
    for path, queue in p.queues.items():
        over = {r: a - queue.max[r] for r, a in queue.allocated.items() if queue.max is not None and r in queue.max and a > queue.max[r]}
        if over:
            told = [d for d in enforced if d.queue == path and d.short]
            assert told and dict(told[-1].short or {}) == over, f"{path} is {over} over its max and no decision says so"
    for leaf in LEAVES:
        queue = p.queues[f"root.team.{leaf}"]
        before = sum(e["resources"]["vcore"] for e in scenario["events"] if e.get("queue") == queue.path) * 1000
        assert queue.allocated.get("vcore", 0) >= min(queue.guaranteed.get("vcore", 0), before), f"{queue.path} went below its guarantee"
    report = replay(result.records, log_id="sim")
    assert report.divergence is None and report.reproduced == len(result.decisions)


def test_a_victim_of_quota_enforcement_is_explained_with_the_cut(tmp_path) -> None:
    """`explain` of a victim tells the cut (old and new max), the delay, the target and why it went."""
    db = tmp_path / "quota.db"
    assert preemptd("simulate", str(ROOT / "examples" / "quota-enforcement.yaml"), "--quiet", "--db", str(db)).returncode == 0
    told = preemptd("explain", "a-3", "--db", str(db))
    assert told.returncode == 0, told.stderr
    assert "decision.quota_enforced" in told.stdout and "max is vcore 4 (was vcore 8)" in told.stdout and "quota.preemption.delay 30s" in told.stdout
    assert "spared a-1: not needed" in told.stdout and "- task a-3 (application train, queue root.team-a, priority 0, vcore 2)" in told.stdout
