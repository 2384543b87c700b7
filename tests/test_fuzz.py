"""Nothing a shim sends can stop ingest: generated messages, mostly mutations of valid events
(values of every type and size, fields dropped or added, deep nesting, truncation, stray bytes),
go through decoding, validation, the fold and snapshots, in-process.

Every message must end as a record or as a dead letter with a reason of the contract or of the
fold: never as an error of preemptd's (the safety net of `ingest` catching what it should not
have had to), and a snapshot of what was accepted must restore to an equal state.

The seed is printed on failure; `PREEMPTD_FUZZ_SEED=<seed>` replays one run.
"""

from __future__ import annotations

import json
import os
import random
import re
from typing import Any

from preemptd.daemon.ingest import decode, fold
from preemptd.daemon.records import Inbound
from preemptd.events import MAX_QUANTITY, MAX_TIMESTAMP
from preemptd.projections import ClusterState
from preemptd.scheduling import restore, run_cycle, snapshot, tick_record

INPUTS = 100_000
SEED = int(os.environ.get("PREEMPTD_FUZZ_SEED") or random.SystemRandom().randrange(2**32))

NAMES = ["n1", "n2", "t1", "t2", "t3", "a1", "a2", "root.default", "root.a", "root.a.b", "p", "", "\x1b[31mred", "\u202egnp.exe", "名前", "🚀", "a" * 300]
QUANTITIES: list[Any] = [
    1,
    0,
    -1,
    "500m",
    "2Gi",
    "1.5",
    "1e3",
    "1e400",
    "16Ei",
    "1Ei",
    MAX_QUANTITY,
    MAX_QUANTITY + 1,
    10**30,
    0.5,
    1e308,
    "lots",
    None,
    True,
    [],
    {},
]
INTS: list[Any] = [0, 1, -1, 2**31, -(2**31) - 1, 2**63, 10**30, MAX_TIMESTAMP, MAX_TIMESTAMP + 1, 1.5, "7", None, True]


def valid_events(rng: random.Random) -> list[dict[str, Any]]:
    """One of each kind, referring to each other often enough to be accepted."""
    node, task, app = rng.choice(["n1", "n2"]), rng.choice(["t1", "t2", "t3"]), rng.choice(["a1", "a2"])
    resources = {rng.choice(["vcore", "memory", "nvidia.com/gpu", "pods"]): rng.choice(["1", "500m", "2Gi", 3]) for _ in range(rng.randint(1, 3))}
    queues = [{"name": "a", "resources": {"guaranteed": {"vcore": rng.randint(0, 8)}}, "queues": [{"name": "b"}]}, {"name": "default"}]
    return [
        {"type": "node.upserted", "node": node, "capacity": {"vcore": rng.randint(1, 64), "memory": "64Gi"}, "labels": {"zone": "a"}},
        {"type": "node.removed", "node": node},
        {"type": "priorityclass.upserted", "name": "p", "value": rng.randint(-5, 5), "allow_preemption": rng.random() < 0.5},
        {"type": "priorityclass.deleted", "name": "p"},
        {"type": "app.submitted", "app": app, "queue": rng.choice(["root.default", "root.a.b"]), "priority": rng.randint(0, 9)},
        {"type": "app.finished", "app": app},
        {"type": "task.submitted", "task": task, "app": app, "queue": "root.default", "resources": resources},
        {"type": "task.bound", "task": task, "node": node, "app": app, "queue": "root.default", "resources": resources},
        {"type": "task.released", "task": task, "reason": "completed"},
        {"type": "config.applied", "config": {"queues": [{"name": "root", "queues": queues}]}},
    ]


def mutate(rng: random.Random, event: dict[str, Any]) -> dict[str, Any]:
    event = json.loads(json.dumps(event))
    for _ in range(rng.randint(0, 3)):
        key = rng.choice([*event, "extra", "resources", "capacity", "ts", "partition", "type", "priority", "task_priority", "min_available"])
        choice = rng.randrange(8)
        if choice == 0:
            event.pop(key, None)
        elif choice == 1:
            event[key] = rng.choice(NAMES)
        elif choice == 2:
            event[key] = rng.choice(INTS)
        elif choice == 3:
            event[key] = {rng.choice(NAMES) or "x": rng.choice(QUANTITIES) for _ in range(rng.choice([1, 2, 65]))}
        elif choice == 4:
            depth = 100_000 if rng.random() < 0.01 else rng.choice([3, 63, 64, 65, 2000])  # the deepest cost most
            event[key] = f"<deep {depth}>"  # spliced into the JSON text
        elif choice == 5:
            event[key] = "x" * rng.choice([10, 300, 5000])
        elif choice == 6 and isinstance(event.get("config"), dict):
            event["config"]["queues"] = rng.choice(
                [[{"name": "root", "queues": [{"name": "a", "resources": {"max": {"vcore": rng.choice(QUANTITIES)}}}]}], "nope", [[]]]
            )
        else:
            event["type"] = rng.choice(["task.submitted", "task.exploded", "clock.ticked", "decision.allocated", 7, None])
    return event


def message(rng: random.Random, index: int, seq: int) -> Inbound:
    event = mutate(rng, rng.choice(valid_events(rng))) if rng.random() < 0.9 else rng.choice(valid_events(rng))
    event.setdefault("id", f"e{index}" if rng.random() < 0.95 else "e1")
    event.setdefault("ts", index)
    raw = re.sub(rb'"<deep (\d+)>"', lambda m: b"[" * int(m[1]) + b"]" * int(m[1]), json.dumps(event, allow_nan=True).encode())
    shape = rng.randrange(40)
    if shape == 0:
        raw = raw[: rng.randrange(len(raw) + 1)]
    elif shape == 1:
        spot = rng.randrange(len(raw))
        raw = raw[:spot] + bytes([rng.randrange(256)]) + raw[spot + 1 :]
    elif shape == 2:
        raw = rng.choice([b"", b"null", b"[]", b"\xff\xfe", b'"\\ud800"', b"{" * 1000, b'{"type":"node.upserted"' + b" " * 2_000_000 + b"}"])
    partition = event.get("partition") if isinstance(event.get("partition"), str) else "default"
    kind = str(event.get("type", "x")).split(".")[0]
    return Inbound(f"preemptd.cluster.{partition}.{kind}", raw, seq, handle=None)


def test_no_generated_input_gets_past_the_contract_and_the_fold_as_an_error_of_ours() -> None:
    rng = random.Random(SEED)
    state = ClusterState(log_id="fuzz")
    known: dict[str, int] = {}
    accepted = refused = 0
    for batch in range(INPUTS // 100):
        messages = [message(rng, batch * 100 + i, batch * 100 + i + 1) for i in range(100)]
        ingested = fold(decode(messages, received=batch), known, state)
        assert ingested.stopped is None, f"seed {SEED}: {ingested.dead[-1].reason}"
        ours = [d.reason for d in ingested.dead if "please report" in d.reason]
        assert ours == [], f"seed {SEED}: {ours[0]}"
        known.update((row.event_id, row.seq) for row in ingested.rows)
        accepted, refused = accepted + len(ingested.rows), refused + len(ingested.dead)
        if batch % 50 == 0 and "default" in state.partitions:
            run_cycle(state, tick_record(state, batch * 1000, "default"))
        if batch % 100 == 0:
            assert restore(snapshot(state)) == state, f"seed {SEED}: batch {batch}"
    assert restore(snapshot(state)) == state, f"seed {SEED}"
    assert accepted > INPUTS // 10 and refused > INPUTS // 2, f"seed {SEED}: the inputs exercise both ways ({accepted} accepted, {refused} refused)"
