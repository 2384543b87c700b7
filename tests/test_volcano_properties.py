"""Properties of the Volcano model over generated clusters (queues by weight or by deserved
capacity, reclaimable or not, of different priorities; gang jobs of several tasks, some not
preemptable, some BestEffort, arriving and finishing; every action in a drawn order):

- with gang voting on victims, no committed decision leaves a gang job below `min_available`;
- reclaim never takes a victim from a queue that holds no more than it deserves;
- preemption comes to rest, even when victims come back as new pending tasks;
- replay reproduces every decision;
- the jobs kept between sessions are, after every record, those read from the whole state;
- the nodes passed over for speed change no decision.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest
from builders import running_every_cycle
from hypothesis import HealthCheck, given, settings, strategies as st

from preemptd.events import Allocated, Preempted, Scenario, encode
from preemptd.projections import ClusterState, PartitionState
from preemptd.scheduling import apply, replay, simulate
from preemptd.scheduling.volcano import _evict
from preemptd.scheduling.volcano._backlog import Filed, KeptJobs
from preemptd.scheduling.volcano._jobs import Job, jobs_of
from preemptd.scheduling.volcano._nodes import Nodes
from preemptd.scheduling.volcano._queues import Quotas, demands_of
from preemptd.scheduling.volcano._shares import QUEUE_EXEMPT
from preemptd.scheduling.volcano._state import session_jobs

QUEUE_API = "scheduling.volcano.sh/v1beta1"


@st.composite
def configurations(draw: st.DrawFn, *, gang_votes: bool | None = None) -> list[dict[str, Any]]:
    sharing = draw(st.sampled_from(["proportion", "capacity"]))
    objects: list[dict[str, Any]] = []
    for i in range(draw(st.integers(2, 4))):
        spec: dict[str, Any] = {"weight": draw(st.integers(1, 3)), "priority": draw(st.sampled_from([0, 0, 1]))}
        if draw(st.integers(0, 3)) == 0:
            spec["reclaimable"] = False
        if sharing == "capacity" and draw(st.booleans()):
            spec["deserved"] = {"cpu": draw(st.integers(1, 6))}
        objects.append({"apiVersion": QUEUE_API, "kind": "Queue", "metadata": {"name": f"q{i}"}, "spec": spec})
    actions = draw(st.permutations(["allocate", "preempt", "reclaim", "backfill"]))
    gang = {"name": "gang"} if (draw(st.booleans()) if gang_votes is None else gang_votes) else {"name": "gang", "enablePreemptable": False}
    objects.append(
        {
            "actions": ", ".join(["enqueue", *actions]),
            "tiers": [
                {"plugins": [{"name": "priority"}, gang, {"name": "conformance"}]},
                {"plugins": [{"name": "predicates"}, {"name": sharing}]},
            ],
        }
    )
    return objects


@st.composite
def scenarios(draw: st.DrawFn, *, requeue: bool = False, gang_votes: bool | None = None) -> Scenario:
    objects = draw(configurations(gang_votes=gang_votes))
    queues = [o["metadata"]["name"] for o in objects if o.get("kind") == "Queue"]
    events: list[dict[str, Any]] = [
        {"at": "0s", "type": "node.upserted", "node": f"n{i}", "capacity": {"cpu": draw(st.integers(2, 6)), "pods": draw(st.integers(3, 8))}}
        for i in range(draw(st.integers(1, 3)))
    ]
    for j in range(draw(st.integers(3, 9))):  # a first wave fills the cluster, a second contends for it
        at, tasks = draw(st.sampled_from([0, 1, 2, 5, 6, 8])), draw(st.integers(1, 4))
        job = {
            "at": f"{at}s",
            "type": "app.submitted",
            "app": f"j{j}",
            "queue": draw(st.sampled_from(queues)),
            "priority": draw(st.integers(0, 2)),
            "min_available": draw(st.sampled_from([1, 1, tasks])),
        }
        events.append(job)
        for t in range(tasks):
            task: dict[str, Any] = {
                "at": f"{at}s",
                "type": "task.submitted",
                "task": f"j{j}-{t}",
                "app": f"j{j}",
                "resources": {"cpu": draw(st.sampled_from([0, 1, 1, 2, 3]))},
            }
            if draw(st.integers(0, 4)) == 0:
                task["preemptable"] = False
            if draw(st.integers(0, 3)) == 0:
                task["task_priority"] = draw(st.integers(1, 3))
            events.append(task)
        if draw(st.integers(0, 3)) == 0:
            events.append({"at": f"{at + draw(st.integers(1, 6))}s", "type": "app.finished", "app": f"j{j}"})
    return msgspec.convert(
        {
            "name": "generated",
            "model": "volcano",
            "config": objects,
            "events": events,
            "until": "40s",
            "shim": {"grace_period": "1s", "recreate_preempted": requeue},
        },
        Scenario,
    )


SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_shim_refusals(result: Any) -> None:
    """The only refusals: the shim releasing a victim, or bringing it back, after its job finished."""
    assert all(event.id.startswith("shim-") and "unknown" in reason for event, reason in result.rejected), result.rejected


@SETTINGS
@given(scenarios(gang_votes=True))
def test_with_gang_voting_no_decision_leaves_a_gang_job_below_min_available(scenario: Scenario) -> None:
    result = simulate(scenario)
    _only_shim_refusals(result)
    state = ClusterState(log_id="sim")
    for record in result.records:
        apply(state, record)
        if not isinstance(record.event, Preempted):
            continue
        p = state.partitions["default"]
        jobs = jobs_of(p)
        for victim in record.event.victims:
            job = jobs[victim.app]
            assert job.running >= job.min_available, (
                f"{record.event.preemptor} took {victim.task}: job {job.id} runs {job.running} of min_available {job.min_available}"
            )


@SETTINGS
@given(scenarios())
def test_reclaim_never_takes_from_a_queue_that_holds_no_more_than_it_deserves(scenario: Scenario) -> None:
    """Each cycle is followed from the state before it: what the queues hold as its decisions
    come, against what they deserve at its start."""
    result = simulate(scenario)
    state = ClusterState(log_id="sim")
    quotas: Quotas | None = None
    cycle = -1
    for record in result.records:
        decision = record.event
        if isinstance(decision, Allocated | Preempted) and decision.cycle != cycle:
            cycle, quotas = decision.cycle, _quotas_now(state)
        p = state.partitions.get("default")
        if isinstance(decision, Preempted) and decision.reason.startswith("reclaim") and quotas is not None and p is not None:
            for victim in decision.victims:
                held, deserved = quotas.holds(victim.queue), quotas.deserved.get(victim.queue, {})
                if quotas.name == "proportion" or deserved:
                    over = [r for r, amount in held.items() if r not in QUEUE_EXEMPT and amount > deserved.get(r, 0)]
                    assert over, f"{decision.preemptor} reclaimed {victim.task} from {victim.queue}, holding {held}, deserving {deserved}"
                _change(quotas.held, victim.queue, victim.resources, -1)
            _change(quotas.held, decision.queue, decision.resources, +1)
        elif isinstance(decision, Allocated) and quotas is not None and p is not None and p.tasks[decision.task].reserved_node is None:
            _change(quotas.held, decision.queue, decision.resources, +1)
        apply(state, record)


def _quotas_now(state: ClusterState) -> Quotas:
    p = state.partitions["default"]
    jobs = jobs_of(p)
    nodes = Nodes.of(p, jobs)
    return Quotas(p.settings, p.capacity, demands_of(p, {job.queue for job in jobs.values()}), nodes.held)


def _change(held: Any, queue: str, resources: Any, sign: int) -> None:
    amounts = held.setdefault(queue, {})
    for r, amount in resources.items():
        amounts[r] = amounts.get(r, 0) + sign * amount


@SETTINGS
@given(scenarios(requeue=True))
def test_preemption_comes_to_rest_even_with_victims_coming_back(scenario: Scenario) -> None:
    """Every event arrives by 14s; from 25s on, nothing is evicted any more."""
    result = simulate(scenario)
    late = [d for d in result.decisions if isinstance(d, Preempted) and d.victims and d.ts >= 25_000]
    assert late == []


@SETTINGS
@given(scenarios(requeue=True))
def test_the_jobs_kept_between_sessions_are_those_of_the_whole_state_after_every_record(scenario: Scenario) -> None:
    """A session starts from jobs read again only where the fold said something changed: after
    any record, they equal reading every application (order, tasks, what each job counts)."""
    result = simulate(scenario)
    state = ClusterState(log_id="sim")
    for record in result.records:
        apply(state, record)
        p = state.partitions["default"]
        if p.model != "volcano":
            continue
        kept = session_jobs(p)
        started, tasks, idle = kept.started, kept.tasks, kept.idle
        whole = jobs_of(p)
        busy = {job_id: job for job_id, job in whole.items() if len(job.pending) < len(job.tasks)}
        assert {job_id: _job_fields(job) for job_id, job in started.items()} == {job_id: _job_fields(job) for job_id, job in busy.items()}, record.event
        assert sorted(tasks) == sorted(task.id for job in busy.values() for task in job.tasks), record.event
        assert sorted(kept.pending) == sorted(job_id for job_id, job in busy.items() if job.pending), record.event
        assert sorted(kept.pipelined) == sorted(job_id for job_id, job in busy.items() if job.pipelined), record.event
        by_queue: dict[str, set[str]] = {}
        for job_id, job in busy.items():
            by_queue.setdefault(job.queue, set()).add(job_id)
        assert {queue: set(jobs) for queue, jobs in kept.by_queue.items()} == by_queue, record.event
        elastic = {queue: {r: a for r, a in amounts.items() if a} for queue, amounts in kept.elastic.items()}
        summed_now: dict[str, dict[str, int]] = {}
        for job in busy.values():
            for r, a in job.elastic_resources.items():
                summed_now.setdefault(job.queue, {})[r] = summed_now.get(job.queue, {}).get(r, 0) + a
        assert {q: a for q, a in elastic.items() if a} == {q: {r: x for r, x in a.items() if x} for q, a in summed_now.items() if any(a.values())}, record.event
        filed = {
            job_id: (queue, gang, tuple(key for key, job in bucket if job == job_id), told)
            for queue, q in idle.queues.items()
            for gang, group in q.groups.items()
            for told, bucket in group.told.items()
            for _, job_id in bucket
        }
        fresh = {job_id: (f.queue, f.gang, (f.key,), f.told) for job_id in whole.keys() - busy.keys() for f in [kept_jobs_filing(p, job_id)]}
        assert filed == fresh, record.event


def kept_jobs_filing(p: PartitionState, job_id: str) -> Filed:
    """Where an idle job is filed when read afresh."""
    return KeptJobs(p)._filing(p, p.apps[job_id])


def _job_fields(job: Job) -> tuple[Any, ...]:
    return (dataclasses.asdict(job), job.running, job.pipelined, job.held, [t.id for t in job.elastic], [t.id for t in job.pending])


@SETTINGS
@given(scenarios(requeue=True))
def test_replay_reproduces_every_decision(scenario: Scenario) -> None:
    result = simulate(scenario)
    _only_shim_refusals(result)
    report = replay(result.records, log_id="sim")
    assert report.divergence is None
    assert report.reproduced == len(result.decisions)


@SETTINGS
@given(scenarios())
def test_the_nodes_passed_over_for_speed_change_no_decision(scenario: Scenario) -> None:
    """A task that fits no node now is not looked for on nodes with neither candidates nor
    room being released; searching every node decides the same."""
    quick = [encode(d) for d in simulate(scenario).decisions]
    original = _evict.try_room
    _evict.try_room = lambda *args, **kwargs: original(*args)  # every node
    try:
        thorough = [encode(d) for d in simulate(scenario).decisions]
    finally:
        _evict.try_room = original
    assert quick == thorough


@SETTINGS
@given(scenarios(requeue=True))
def test_a_session_passed_over_because_nothing_changed_decides_what_running_it_would(scenario: Scenario) -> None:
    """Volcano waits on nothing but events: after a session that decided nothing, with only
    ticks since, the next is passed over. Running every one of them instead makes the same log."""
    passing_over = simulate(scenario)
    with pytest.MonkeyPatch.context() as patch:
        running_every_cycle(patch)
        running_all = simulate(scenario)
    assert [encode(r.event) for r in passing_over.records] == [encode(r.event) for r in running_all.records]
