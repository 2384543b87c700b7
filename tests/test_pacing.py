"""When a partition's cycle is due: the one rule the daemon (on its clock) and the simulator
(on simulated time) share."""

from __future__ import annotations

from builders import R, config, fold_events, node, task

from preemptd.events import Allocated, Tick
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import Cadence, Pacer, apply, replay, run_cycle, tick_record

CADENCE = Cadence(tick=1000, idle_tick=30_000, min_gap=100)


def pending_partition(delay: str = "30s") -> ClusterState:
    """One task that cannot be placed (no node) under a preemption.delay of `delay`."""
    return fold_events(config([{"name": "a", "properties": {"preemption.delay": delay}}]), task("t1", "app", "root.a", ts=0))


def cycle(state: ClusterState, pacer: Pacer, now: int, took: int = 0) -> int:
    """Run the partition's cycle at `now` (the log's time too); the decisions it made."""
    made = len(run_cycle(state, tick_record(state, now, "default")).decided)
    pacer.ran(state, "default", now, took, made)
    return made


def test_a_partition_with_nothing_pending_has_no_cycle() -> None:
    state = fold_events(config([{"name": "a"}]), node("n1", vcore=4))
    assert Pacer(CADENCE).due(state, 0) == []


def test_the_first_cycle_of_a_partition_with_pending_tasks_is_due_at_once() -> None:
    assert Pacer(CADENCE).due(pending_partition(), 0) == ["default"]


def test_after_events_a_cycle_comes_at_once_but_no_more_than_half_the_time() -> None:
    state, pacer = pending_partition(), Pacer(CADENCE)
    cycle(state, pacer, 0, took=400)
    pacer.touched("default")
    assert pacer.due(state, 799) == [], "a cycle of 0.4 s is followed by 0.4 s for ingest"
    assert pacer.due(state, 800) == ["default"]
    cycle(state, pacer, 800, took=10)
    pacer.touched("default")
    assert pacer.due(state, 899) == [] and pacer.due(state, 900) == ["default"], "at most every min_gap"


def test_while_cycles_decide_one_comes_every_tick() -> None:
    small, big = task("small", "app", "root.a"), task("big", "app", "root.a", resources=R(vcore=8))
    state, pacer = fold_events(config([{"name": "a"}]), node("n1", vcore=4), small, big), Pacer(CADENCE)
    assert cycle(state, pacer, 0) == 1, "small is allocated; big fits no node and waits"
    assert pacer.due(state, 999) == [] and pacer.due(state, 1000) == ["default"]


def test_an_idle_partition_waits_for_the_idle_tick_or_the_end_of_a_delay() -> None:
    state, pacer = pending_partition(delay="5s"), Pacer(CADENCE)
    assert cycle(state, pacer, 1_000) == 0, "no node: nothing to decide"
    assert pacer.due(state, 1_000 + 3_999) == [], "the task's delay runs out at 5 s in the log's time"
    assert pacer.due(state, 5_000) == ["default"]
    assert cycle(state, pacer, 5_000) == 1, "the delay is over: the task is refused preemption (decision.blocked)"
    assert cycle(state, pacer, 6_000) == 0, "the same refusal is not sent again"
    assert pacer.due(state, 6_000 + 29_999) == [] and pacer.due(state, 36_000) == ["default"], "no delay left: every idle tick"


def test_a_delay_that_runs_out_after_a_deciding_cycle_wakes_the_partition_then_not_a_tick_later() -> None:
    """A cycle that decided something used to be followed by one a tick later only: a task whose
    preemption.delay ran out in between waited up to a tick more (the latency bench saw 0.5 s)."""
    waiting = task("waiting", "app", "root.a", ts=0, resources=R(vcore=8))
    small = task("small", "app", "root.a", ts=0)
    state, pacer = fold_events(config([{"name": "a", "properties": {"preemption.delay": "300ms"}}]), node("n1", vcore=4), waiting, small), Pacer(CADENCE)
    assert cycle(state, pacer, 0) == 1, "small is allocated; waiting fits no node and its delay runs to 300 ms"
    assert pacer.due(state, 299) == [] and pacer.due(state, 300) == ["default"], "at the end of the delay, within the tick"


def test_a_wakeup_is_a_distance_from_the_tick_so_the_pacing_clock_may_differ_from_the_logs() -> None:
    state, pacer = pending_partition(delay="5s"), Pacer(CADENCE)
    run_cycle(state, tick_record(state, 1_000, "default"))
    pacer.ran(state, "default", started=70_000, took=0, decisions=0)  # a monotonic clock far from the log's
    assert pacer.due(state, 73_999) == [] and pacer.due(state, 74_000) == ["default"]


def test_the_simulators_cadence_gives_a_cycle_every_tick_while_tasks_are_pending() -> None:
    state, pacer = pending_partition(), Pacer(Cadence(tick=1000, idle_tick=1000))
    for now in range(0, 10_000, 1000):
        assert pacer.due(state, now) == ["default"]
        cycle(state, pacer, now)


def test_after_a_long_cycle_the_next_waits_as_long_so_that_events_are_read_between() -> None:
    """The half-the-time rule covers every cycle, not only those that events start: a deciding
    partition whose cycle took 0.8 s gets its next at 1.6 s, not at once."""
    small, big = task("small", "app", "root.a"), task("big", "app", "root.a", resources=R(vcore=8))
    state, pacer = fold_events(config([{"name": "a"}]), node("n1", vcore=4), small, big), Pacer(CADENCE)
    assert cycle(state, pacer, 0, took=800) == 1
    assert pacer.due(state, 1599) == [] and pacer.due(state, 1600) == ["default"]


def test_asking_what_is_due_looks_only_at_partitions_that_could_be() -> None:
    """The 10 ms heartbeat asked every partition each time: 10,000 partitions burnt most of a
    core while idle. Partitions without pending tasks are set aside until an event touches them."""
    from preemptd import events as ev

    state = fold_events(*(ev.NodeUpserted(id=f"n{i}", ts=0, partition=f"p{i}", node="n", capacity=R(vcore=1)) for i in range(10_000)))
    pacer = Pacer(CADENCE)
    assert pacer.due(state, 0) == []
    assert pacer._live == set(), "set aside"
    fold_events(ev.TaskSubmitted(id="t", ts=0, partition="p7", task="t", app="a", queue="root.default", resources=R(vcore=2)), state=state)
    pacer.touched("p7")
    assert pacer.due(state, 0) == ["p7"] and pacer._live == {"p7"}


def test_a_cycle_out_of_time_stops_says_where_in_its_tick_and_replays_exactly() -> None:
    """With the daemon's clock saying the cycle's time ran out after a few checks, it stops
    between decisions (the phase's first decision is made whatever the time), its tick records
    where (`cut`, and `resume`: the phase stopped and the queue it began at), the next cycle
    goes on, and a replay of the log stops each cycle where the live one did."""
    events = [config([{"name": "a"}]), node("n1", vcore=64), *(task(f"t{i}", "app", "root.a") for i in range(30))]
    records = [LogRecord(seq, 0, event) for seq, event in enumerate(events, start=1)]
    state = ClusterState(log_id="sim")
    for record in records:
        apply(state, record)
    checks = iter(range(1000))
    for now in range(0, 10_000, 1000):  # a clock running out at every seventh check
        records += run_cycle(state, tick_record(state, now, "default"), lambda: next(checks) % 7 == 6).records
    ticks = [r for r in records if isinstance(r.event, Tick)]
    assert [tick.event.out_of_time_after for tick in ticks[:2]] == [7, 7], "the decisions made when its time ran out"
    assert ticks[0].event.resume == {"allocate": "root.a"}, "the phase stopped, and the queue it began at"
    placed = [r.seq for r in records if isinstance(r.event, Allocated)]
    assert len(placed) == 30 and sum(seq < ticks[1].seq for seq in placed) == 7, "the phase's first placement, then 6 checks said yes"
    replayed = replay(records, log_id="sim")
    assert replayed.divergence is None and replayed.reproduced == 30


def test_a_cycle_cut_short_is_followed_at_once_not_a_tick_later() -> None:
    state, pacer = pending_partition(), Pacer(CADENCE)
    run_cycle(state, tick_record(state, 0, "default"))
    pacer.ran(state, "default", 0, 10, 0, cut=True)
    assert pacer.due(state, 99) == [] and pacer.due(state, 100) == ["default"], "after min_gap, as after events"
