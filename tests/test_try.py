"""`preemptd try`: what would be decided if these events arrived now, asked of the running
daemon (NATS request/reply, from a copy-on-write fork of its state) or of a log at a point,
under its configuration or another; nothing is logged, published or folded into the state."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import anyio
import msgspec
import pytest
import yaml
from conftest import ROOT, preemptd
from hypothesis import HealthCheck, given, settings, strategies as st

from preemptd.daemon.queries import ASKER_BURST, ASKER_RATE, CHILD_NICENESS, Admission, Queries, answer_json, ask_events, trial_in_child
from preemptd.events import Scenario, to_builtins
from preemptd.projections import ClusterState, LogRecord
from preemptd.scheduling import TrialRefused, apply, run_cycle, simulate, snapshot, tick_record, trial

EVENTS = ROOT / "examples" / "events"


def quickstart_state() -> ClusterState:
    """The first session after its first step: team b holds the whole node."""
    first = yaml.safe_load((EVENTS / "quickstart-1.yaml").read_text())
    scenario = msgspec.convert({"name": "quickstart", "config": first[0]["config"], "events": first[1:], "until": "3s"}, Scenario)
    return simulate(scenario).state


def team_a_query() -> bytes:
    """Step 2 of the first session, as a query's body: team a's two tasks."""
    return json.dumps(yaml.safe_load((EVENTS / "quickstart-2.yaml").read_text())).encode()


def team_a() -> list:
    """The same, as events."""
    return ask_events(team_a_query(), "default", 4000)


def test_team_as_tasks_would_preempt_one_of_team_bs_each_once_the_delay_has_run_out() -> None:
    """The README's first session asked before step 2: a-1 preempts b-4 when root's 5 s
    preemption delay runs out, a-2 preempts b-3 in the cycle after, as the daemon did."""
    answered = trial(quickstart_state(), "default", team_a(), 4000)
    said = [(after, d.preemptor, [v.task for v in d.victims], d.reason) for after, d in answered.decisions]
    assert said == [(5000, "a-1", ["b-4"], "guarantee"), (6000, "a-2", ["b-3"], "guarantee")]
    assert dict(answered.cycles)[5000] == "a delay runs out" and dict(answered.cycles)[6000] == "the next cycle runs"
    assert answered.undecided == () and answered.seq == quickstart_state().seq


def test_asking_in_a_forked_child_leaves_the_state_as_it_was() -> None:
    state = quickstart_state()
    before = snapshot(state)
    answer = json.loads(anyio.run(lambda: trial_in_child(state, "default", team_a_query(), 4000, tick=1000)))
    assert [d["preemptor"] for d in answer["decisions"]] == ["a-1", "a-2"] and answer["decisions"][0]["when"] == "a delay runs out"
    assert "id" not in answer["decisions"][0], "no id is used"
    assert snapshot(state) == before, "the daemon's state is untouched"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"not json", "the query is not JSON"),
        (b"[1]", "event 1 is not a JSON object"),
        (json.dumps([{"type": "task.submited", "task": "x"}]).encode(), "event 1: unknown event type 'task.submited'"),
        (
            json.dumps([{"type": "task.submitted", "task": "x", "app": "a", "queue": "root.a", "resources": {"vcore": 1}}] * 1001).encode(),
            "a query holds at most 1,000",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "nests objects and arrays 100,000 levels deep; the limit is 64"),  # parsed, a RecursionError
        (b"[" + b" " * (1 << 20) + b"]", "the limit is 1,048,576"),
    ],
)
def test_a_query_that_cannot_be_asked_is_refused_with_a_reason(body: bytes, said: str) -> None:
    with pytest.raises(TrialRefused) as refused:
        ask_events(body, "default", 0)
    assert said in refused.value.reason


def test_a_query_of_an_unknown_partition_or_queue_is_refused_in_one_line() -> None:
    state = quickstart_state()
    task = ask_events(
        json.dumps([{"type": "task.submitted", "task": "x", "app": "a", "queue": "root.nowhere", "resources": {"vcore": 1}}]).encode(), "default", 0
    )
    for partition, events, said in (("gpu", task, "no partition 'gpu' here (known: default)"), ("default", task, "event 1 (try-1): ")):
        answer = json.loads(answer_json(_refusal(state, partition, events)))
        assert said in answer["refused"] and "\n" not in answer["refused"]


def _refusal(state: ClusterState, partition: str, events: list) -> TrialRefused:
    with pytest.raises(TrialRefused) as refused:
        trial(state, partition, events, 0)
    return refused.value


_task = st.tuples(st.sampled_from(["root.team-a", "root.team-b"]), st.integers(1, 4))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.lists(_task, min_size=1, max_size=3), st.booleans()), min_size=1, max_size=6))
def test_queries_in_between_change_nothing_the_daemon_logs_or_decides(steps: list) -> None:
    """The same events and cycles, with and without queries asked (in forked children, as the
    daemon asks them) between them: the same log, record for record."""

    def run(asking: bool) -> list:
        state, log, now = quickstart_state(), [], 4000
        for n, (tasks, ask) in enumerate(steps):
            events = [
                {"type": "task.submitted", "task": f"t{n}-{i}", "app": f"app{n}-{queue}", "queue": queue, "resources": {"vcore": size}}
                for i, (queue, size) in enumerate(tasks)
            ]
            if asking and ask:
                query = [{**e, "task": f"q-{e['task']}"} for e in events]
                anyio.run(lambda: trial_in_child(state, "default", json.dumps(query).encode(), now, tick=1000))
            for event in ask_events(json.dumps(events).encode(), "default", now):
                record = LogRecord(state.seq + 1, now, event)
                apply(state, record)
                log.append(record)
            log += run_cycle(state, tick_record(state, now, "default")).records
            now += 1000
        return [(r.seq, r.received, to_builtins(r.event)) for r in log]

    assert run(asking=True) == run(asking=False)


# -- asked of a log ------------------------------------------------------------------------


def test_asked_of_a_log_at_a_point_and_under_another_configuration(tmp_path: Path) -> None:
    """examples/general.yaml at seq 30, queue-1 holding 10 of the node's 12 vcores: eight tasks
    of queue-2 would take the 2 free, and preempt up to queue-2's guarantee of 5 once the 10 s
    delay runs out; under the what-if's guarantee of 7, two more would preempt."""
    db = tmp_path / "general.db"
    assert preemptd("simulate", str(ROOT / "examples" / "general.yaml"), "--quiet", "--db", str(db)).returncode == 0
    asked = tmp_path / "ask.yaml"
    asked.write_text(
        yaml.safe_dump(
            [{"type": "task.submitted", "task": f"late-{i}", "app": "late", "queue": "root.normal.queue-2", "resources": {"vcore": 1}} for i in range(8)]
        )
    )
    here = preemptd("try", str(asked), "--db", str(db), "--at", "30", "--json")
    assert here.returncode == 0, here.stderr
    answer = json.loads(here.stdout)
    assert answer["seq"] == 30 and answer["model"] == "yunikorn"
    what_if = preemptd(
        "try", str(asked), "--db", str(db), "--at", "30", "--json", "--config", str(ROOT / "examples" / "what-if" / "general-bigger-guarantee.yaml")
    )
    assert what_if.returncode == 0, what_if.stderr
    preempting = [sum(d["type"] == "decision.preempted" for d in json.loads(out)["decisions"]) for out in (here.stdout, what_if.stdout)]
    assert preempting == [3, 5] and json.loads(what_if.stdout)["seq"] == 30, preempting
    text = preemptd("try", str(asked), "--db", str(db), "--at", "30")
    assert "in 10 s, when a delay runs out: late-2 (root.normal.queue-2) would preempt app-1-10 (root.normal.queue-1) on node-1 [guarantee]" in text.stdout, (
        text.stdout
    )
    assert preemptd("state", "--db", str(db)).stdout == preemptd("state", "--db", str(db)).stdout
    past = preemptd("try", str(asked), "--db", str(db), "--at", "100000")
    assert past.returncode == 2 and "past the end of the log" in past.stderr


_A9 = [{"type": "task.submitted", "task": "a-9-pod", "app": "a-9", "queue": "team-a", "resources": {"cpu": 1}}]
_GANG = [{"type": "app.submitted", "app": "gang", "queue": "eng-dev", "min_available": 2}]
_GANG += [{"type": "task.submitted", "task": f"gang-{i}", "app": "gang", "queue": "eng-dev", "resources": {"cpu": 1}} for i in range(2)]


@pytest.mark.parametrize(
    ("example", "at", "events", "expected"),
    [
        # team-a has room at seq 10: the workload is admitted, with its flavor
        (
            "kueue/reclaim-within-cohort",
            "10",
            _A9,
            lambda ds: [(d["type"], d["app"], d.get("flavors")) for d in ds] == [("decision.admitted", "a-9", {"cpu": "default-flavor"})],
        ),
        # at seq 15 team-b borrows what team-a lent: the workload would evict b-2, reclaiming
        (
            "kueue/reclaim-within-cohort",
            "15",
            _A9,
            lambda ds: [(d["type"], d["app"], d["preemptor"], d["reason"]) for d in ds] == [("decision.evicted", "b-2", "a-9", "InCohortReclamation")],
        ),
        # a gang of two in eng-dev at the end: both tasks decided, together
        ("volcano/hierarchical-capacity", None, _GANG, lambda ds: {d.get("task") or d.get("preemptor") for d in ds} >= {"gang-0", "gang-1"}),
    ],
)
def test_kueue_and_volcano_answer_in_their_own_terms(example: str, at: str | None, events: list, expected, tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(ROOT / "examples" / f"{example}.yaml"), "--quiet", "--db", str(db)).returncode == 0
    asked = tmp_path / "ask.yaml"
    asked.write_text(yaml.safe_dump(events))
    answered = preemptd("try", str(asked), "--db", str(db), "--json", *(("--at", at) if at else ()))
    assert answered.returncode == 0, answered.stderr
    answer = json.loads(answered.stdout)
    assert expected(answer["decisions"]), answer["decisions"]
    assert answer["undecided"] == []


def _workload(name: str, count: int, cpu: str) -> dict:
    """A Kueue Workload as `kubectl get -o yaml` prints it, for ClusterQueue team-a's LocalQueue."""
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"queueName": "training", "podSets": [{"name": "main", "count": count, "template": pod}]},
    }


@pytest.mark.parametrize(
    ("workload", "said"),
    [
        (_workload("fresh", 2, "1"), "  now: workload fresh (ClusterQueue team-a) would be admitted: cpu in default-flavor"),
        (
            _workload("huge", 2, "100"),
            "  now: workload huge (ClusterQueue team-a) would wait: flavor default-flavor: 200 cpu is more than ClusterQueue team-a can ever have (4)",
        ),
    ],
)
def test_a_kueue_answer_speaks_of_the_workload_not_its_pods(workload: dict, said: str, tmp_path: Path) -> None:
    """Asked with a Workload's YAML, the answer names the workload and its ClusterQueue, as
    Kueue's own conditions do, never its first pod (`huge-main-0 (team-a) would wait`)."""
    scenario = yaml.safe_load((ROOT / "examples" / "kueue" / "within-cluster-queue.yaml").read_text())
    scenario["events"] = [e for e in scenario["events"] if e["at"] == "0s" and e["type"] == "node.upserted"]  # an idle ClusterQueue of 4 cpu
    scenario.pop("expect", None)
    (tmp_path / "idle.yaml").write_text(yaml.safe_dump(scenario))
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(tmp_path / "idle.yaml"), "--quiet", "--db", str(db)).returncode == 0, "simulated"
    (tmp_path / "ask.yaml").write_text(yaml.safe_dump(workload))
    answered = preemptd("try", str(tmp_path / "ask.yaml"), "--db", str(db))
    assert answered.returncode == 0, answered.stderr
    assert said in answered.stdout.splitlines(), answered.stdout
    assert "-main-" not in answered.stdout


# -- asked of the running daemon -----------------------------------------------------------


def test_the_running_daemon_answers_without_logging_anything(daemon_factory, tmp_path: Path) -> None:
    daemon = daemon_factory().start()
    state_dir = str(daemon.state_dir)
    assert preemptd("publish", str(EVENTS / "quickstart-1.yaml"), "--state-dir", state_dir).returncode == 0
    daemon.decisions(4)
    before = preemptd("state", "--db", str(daemon.state_dir / "preemptd.db"))
    asked = preemptd("try", str(EVENTS / "quickstart-2.yaml"), "--state-dir", state_dir)
    assert asked.returncode == 0, asked.stderr
    assert "in 5 s, when a delay runs out: a-1 (root.team-a) would preempt b-4 (root.team-b) on node-1 [guarantee]" in asked.stdout, asked.stdout
    assert "a-2 (root.team-a) would preempt b-3 (root.team-b)" in asked.stdout
    time.sleep(1.5)  # a cycle or two later: still nothing of the query in the log
    after = preemptd("state", "--db", str(daemon.state_dir / "preemptd.db"))
    assert after.stdout.splitlines()[0] == before.stdout.splitlines()[0], "the log did not grow"
    unknown = tmp_path / "gpu.yaml"
    unknown.write_text(yaml.safe_dump([{"type": "task.submitted", "partition": "gpu", "task": "g", "app": "g", "queue": "root.a", "resources": {"vcore": 1}}]))
    refused = preemptd("try", str(unknown), "--state-dir", state_dir)
    assert refused.returncode == 2 and "no partition 'gpu' here" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_a_client_in_another_language_asks_with_nats_plain_protocol(daemon_factory) -> None:
    """bash and the NATS text protocol over /dev/tcp, no NATS library: SUB an inbox, PUB the
    query with it as the reply subject, read the MSG that answers."""
    daemon = daemon_factory().start()
    assert preemptd("publish", str(EVENTS / "quickstart-1.yaml"), "--state-dir", str(daemon.state_dir)).returncode == 0
    daemon.decisions(4)
    host, port = daemon.url.removeprefix("nats://").rsplit(":", 1)
    query = json.dumps(yaml.safe_load((EVENTS / "quickstart-2.yaml").read_text()))
    script = f"""
exec 3<>/dev/tcp/{host}/{port}
read -r info <&3
connect='CONNECT {{"verbose":false,"pedantic":false,"headers":false}}\\r\\n'
printf "$connect"'SUB _INBOX.bash 1\\r\\nPUB preemptd.try.default _INBOX.bash %d\\r\\n%s\\r\\nPING\\r\\n' {len(query.encode())} '{query}' >&3
while read -r -t 10 line <&3; do
  case "$line" in MSG*) read -r -t 10 body <&3; echo "$body"; exit 0;; esac
done
exit 1
"""
    answered = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    assert answered.returncode == 0, answered.stderr
    answer = json.loads(answered.stdout)
    assert [(d["preemptor"], d["victims"][0]["task"]) for d in answer["decisions"]] == [("a-1", "b-4"), ("a-2", "b-3")]


def test_the_query_and_its_answer_follow_their_json_schemas() -> None:
    """`preemptd schema try` and `preemptd schema answer`: what a client in any language
    validates against."""
    import jsonschema

    asked, answered = (json.loads(preemptd("schema", kind).stdout) for kind in ("try", "answer"))
    jsonschema.validate(yaml.safe_load((EVENTS / "quickstart-2.yaml").read_text()), asked)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{"type": "task.submitted", "task": "a-1"}], asked)  # no app, queue, resources
    jsonschema.validate(json.loads(answer_json(trial(quickstart_state(), "default", team_a(), 4000))), answered)
    jsonschema.validate(json.loads(answer_json(TrialRefused("why"))), answered)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"decisions": []}, answered)


def test_a_query_that_breaks_the_daemons_side_is_refused_and_never_raised_into_it() -> None:
    """Whatever goes wrong answering a query stays in its reply: the daemon's task group, which
    ingests and decides, never sees it."""

    def broken() -> ClusterState:
        raise RuntimeError("a bug")

    queries = Queries(broken, tick=1000, partitions=None)
    answer = json.loads(anyio.run(lambda: queries.answer("preemptd.try.default", team_a_query(), "_INBOX.asker.1")))
    assert answer == {"refused": "the query failed (RuntimeError); please report it"}


# -- what a query costs the daemon ---------------------------------------------------------------


def test_queries_are_admitted_before_they_are_read_two_at_once_one_per_asker_within_a_budget() -> None:
    """16 askers of 1 MiB queries held a probe's decisions for seconds: each query was read on
    the daemon's loop before it was turned away. Admission decides on who asks and how much,
    and refuses at once."""
    admission = Admission()
    assert admission.admit("_INBOX.a", 100, now=0.0) is None
    assert admission.admit("_INBOX.a", 100, now=0.0)[0] == "asking", "one at a time per asker"
    assert admission.admit("_INBOX.b", 100, now=0.0) is None
    busy = admission.admit("_INBOX.c", 100, now=0.0)
    assert busy is not None and busy[0] == "busy" and busy[1].reason == "busy: 2 queries are being answered; ask again in a moment"
    assert admission.admit("_INBOX.c", (1 << 20) + 1, now=0.0)[0] == "size"
    for _ in range(ASKER_BURST - 1):  # asking again at once while busy spends the budget too (the first busy spent one)
        admission.admit("_INBOX.c", 100, now=0.0)
    over = admission.admit("_INBOX.c", 100, now=0.0)
    assert over is not None and over[0] == "budget" and over[1] is not None and over[1].reason.startswith("this connection asked 10 queries in a burst")
    assert admission.admit("_INBOX.c", 100, now=0.5) == ("budget", None), "told once a second; the rest go unanswered"
    admission.done("_INBOX.a")
    admission.done("_INBOX.b")
    outcomes = []
    for _ in range(ASKER_BURST + 1):  # a burst, then one a second
        refused = admission.admit("_INBOX.d", 100, now=1.0)
        outcomes.append(refused[0] if refused else "asked")
        admission.done("_INBOX.d")
    assert outcomes == ["asked"] * ASKER_BURST + ["budget"]
    assert admission.admit("_INBOX.d", 100, now=1.0 + 1 / ASKER_RATE) is None


def test_what_queries_became_is_counted_and_the_child_runs_below_the_daemons_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    from preemptd.daemon import queries as queries_module

    def niceness(*args: object, **kwargs: object) -> None:
        raise TrialRefused(f"niceness {os.nice(0)}")

    queries = Queries(quickstart_state, tick=1000, partitions=None, budget=0.5)

    async def ask() -> list:
        answers = [await queries.answer("preemptd.try.default", team_a_query(), "_INBOX.a.1")]
        answers.append(await queries.answer("preemptd.try.default", b"not json", "_INBOX.a.2"))
        answers.append(await queries.answer("preemptd.try.default", team_a_query(), None))
        monkeypatch.setattr(queries_module, "trial", niceness)
        answers.append(await queries.answer("preemptd.try.default", team_a_query(), "_INBOX.a.3"))
        monkeypatch.setattr(queries_module, "trial", lambda *args, **kwargs: time.sleep(30))
        answers.append(await queries.answer("preemptd.try.default", team_a_query(), "_INBOX.a.4"))
        return answers

    answered, not_json, unanswerable, nice, slow = anyio.run(ask)
    assert [d["preemptor"] for d in json.loads(answered)["decisions"]] == ["a-1", "a-2"]
    assert json.loads(not_json)["refused"].startswith("the query is not JSON")
    assert unanswerable is None, "no reply subject: no one to answer, and no child"
    assert json.loads(nice) == {"refused": f"niceness {os.nice(0) + CHILD_NICENESS}"}
    assert json.loads(slow) == {"refused": "the query took longer than 0.5 s: ask about fewer tasks"}
    assert queries.counts.outcomes == {"answered": 1, "refused": 2, "no_reply": 1, "time": 1}
    said = queries.counts.since_said()
    assert said is not None and said["asked"] == 5 and said["refused_time"] == 1 and queries.counts.since_said() is None


def test_an_answer_larger_than_nats_carries_is_refused_in_one_line() -> None:
    """An answer beyond the server's max_payload was dropped by NATS, and the asker waited 10 s
    for nothing."""
    queries = Queries(quickstart_state, tick=1000, partitions=None, max_payload=300)
    answer = json.loads(anyio.run(lambda: queries.answer("preemptd.try.default", team_a_query(), "_INBOX.a.1")))
    assert re.fullmatch(
        r"the answer is [\d,]+ bytes, more than a reply may be \(300, NATS's max_payload permitting\): ask about fewer tasks", answer["refused"]
    )


@pytest.mark.parametrize("count, size", [(6_000, 2), (64, (1 << 20) - 1024)], ids=["many small", "1 MiB ones"])
def test_a_flood_of_requests_is_read_at_most_so_many_a_second_then_answered_again(nats_server, caplog: pytest.LogCaptureFixture, count: int, size: int) -> None:
    """Publishers that never wait for a reply sent 12,000 queries a second, and reading them
    alone held the daemon's decisions 200 ms. Past `REQUESTS_PER_SECOND` within a second the
    subscription pauses for the rest of it (NATS drops what comes meanwhile, unread); then
    queries are answered again."""
    import nats

    from preemptd.daemon.bus import Bus
    from preemptd.daemon.bus.connection import REQUEST_BYTES_PER_SECOND, REQUESTS_PER_SECOND

    screened: list[str | None] = []

    def screen(subject: str, body: bytes, reply: str | None) -> bytes | None:
        screened.append(reply)
        return b"answered" if reply is not None else None

    async def flood() -> bytes:
        bus = await Bus.connect(nats_server.url, name="serving")
        flooder = await nats.connect(nats_server.url)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(bus.serve, ["preemptd.try.default"], screen)
                await anyio.sleep(0.2)
                for _ in range(count):
                    await flooder.publish("preemptd.try.default", b"x" * size)
                await flooder.flush()
                await anyio.sleep(1.2)  # the pause is over
                answer = (await flooder.request("preemptd.try.default", b"[]", timeout=5)).data
                tg.cancel_scope.cancel()
            return answer
        finally:
            await flooder.close()
            await bus.close()

    with caplog.at_level("WARNING"):
        assert anyio.run(flood) == b"answered"
    assert len(screened) == 1 + min(REQUESTS_PER_SECOND, REQUEST_BYTES_PER_SECOND // size), (
        "the flood read up to the limit (the rest dropped unread), then the request"
    )
    assert "requests paused: more than the daemon reads a second came" in caplog.text
