"""Making room for one preemptor: the nodes by name, the votes' victims on each, evicted in
order only until the preemptor fits the node's future; a node that cannot make room keeps its
tasks, and the preemptor is pipelined on the node that can."""

from __future__ import annotations

import copy
import dataclasses

from conftest import partition_after

from preemptd.scheduling.volcano._config import parse_objects
from preemptd.scheduling.volcano._jobs import jobs_of
from preemptd.scheduling.volcano._nodes import Nodes, Statement
from preemptd.scheduling.volcano._victims import make_room
from preemptd.scheduling.volcano._votes import Ballot

CONF = parse_objects([{"actions": "preempt", "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}]}]}])[0].scheduler


P = partition_after(
    {"type": "node.upserted", "node": "n1", "capacity": {"vcore": 4, "pods": 10}},
    {"type": "node.upserted", "node": "n2", "capacity": {"vcore": 4, "pods": 10}},
    # on n1, a gang job at its gang size: protected
    {"type": "app.submitted", "app": "gang", "queue": "root.default", "priority": 0, "min_available": 2},
    {"type": "task.bound", "task": "gang-0", "app": "gang", "node": "n1", "resources": {"vcore": 2}},
    {"type": "task.bound", "task": "gang-1", "app": "gang", "node": "n1", "resources": {"vcore": 2}},
    # on n2, three single tasks of a low-priority job
    {"type": "app.submitted", "app": "low", "queue": "root.default", "priority": 0, "min_available": 1},
    *({"type": "task.bound", "task": f"low-{i}", "app": "low", "node": "n2", "resources": {"vcore": 1}} for i in range(3)),
    {"type": "app.submitted", "app": "high", "queue": "root.default", "priority": 10, "min_available": 1},
    {"type": "task.submitted", "task": "high-0", "app": "high", "resources": {"vcore": 2}},
)
JOBS = jobs_of(P)
BALLOT = Ballot(jobs=JOBS, held={}, deserved={}, ready={job.id: job.running for job in JOBS.values()})
CANDIDATES: dict[str, list] = {}
for candidate in [*JOBS["gang"].tasks, *JOBS["low"].tasks]:
    CANDIDATES.setdefault(candidate.node, []).append(candidate)


def anyone(task) -> bool:
    return True


def test_victims_go_only_until_the_preemptor_fits_on_the_first_node_that_can_make_room() -> None:
    statement = Statement(Nodes.of(P))
    room, spared, seen = make_room(JOBS["high"].tasks[0], CANDIDATES, anyone, "preemptable", CONF, BALLOT, statement)
    assert room is not None
    assert (room.node, [t.id for t in room.victims]) == ("n2", ["low-0"]), "n2 has 1 idle: one victim of 1 makes 2"
    assert room.voters == ("priority", "gang")
    assert spared["gang-0"] == "gang: job gang would drop below min_available 2 (2 ready)"
    assert statement.nodes.releasing["n2"]["vcore"] == 1000 and statement.nodes.pipelined["n2"]["vcore"] == 2000


def test_a_node_that_cannot_make_room_keeps_every_task_and_nothing_stays_pipelined() -> None:
    nodes = Nodes.of(P, JOBS)

    def counted() -> tuple[object, ...]:
        per_job = {job: (nodes.ready.get(job), nodes.waiting.get(job), nodes.job_held.get(job)) for job in JOBS}
        per_queue = {job.queue: nodes.held.get(job.queue) for job in JOBS.values()}
        return copy.deepcopy((nodes.releasing, nodes.pipelined, per_queue, per_job))

    before = counted()
    task = JOBS["high"].tasks[0]
    big = dataclasses.replace(task, resources={"vcore": 5000, "pods": 1})  # more than any node holds
    assert make_room(big, CANDIDATES, anyone, "preemptable", CONF, BALLOT, Statement(nodes))[0] is None
    never_enough = make_room(task, CANDIDATES, anyone, "preemptable", CONF, BALLOT, Statement(nodes), enough=lambda: False)
    assert never_enough[0] is None, "the queue's rule wants more than n2's victims: all evicted, then undone"
    assert counted() == before
