"""The ingest decision, without NATS or SQL: which delivered messages continue the log, which
become records and which dead letters (and why), and which partitions they touched."""

from __future__ import annotations

import json

import pytest

from preemptd.daemon.ingest import Position, continuing, decode, fold, read_configurations
from preemptd.daemon.records import Inbound
from preemptd.projections import ClusterState
from preemptd.scheduling import apply, snapshot


def message(seq: int, data: dict | bytes, *, partition: str = "default", generation: int = 1) -> Inbound:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    kind = data.get("type", "x").split(".")[0] if isinstance(data, dict) else "x"
    return Inbound(f"preemptd.cluster.{partition}.{kind}", raw, seq, handle=None, generation=generation)


def node(seq: int, event_id: str | None = None, *, generation: int = 1, partition: str = "default") -> Inbound:
    event = {"type": "node.upserted", "id": event_id or f"n{seq}", "ts": 1, "partition": partition, "node": f"n{seq}", "capacity": {"vcore": 4}}
    return message(seq, event, generation=generation, partition=partition)


def seqs(messages: list[Inbound]) -> list[int]:
    return [m.stream_seq for m in messages]


# -- which messages continue the log -----------------------------------------------------------


def test_messages_after_the_committed_position_continue_it_in_stream_order() -> None:
    delivery = continuing([node(7), node(5), node(6)], Position(committed=4, generation=1, resumed_at=1))
    assert seqs(delivery.fresh) == [5, 6, 7] and delivery.resume is None and delivery.gone is None


def test_messages_already_committed_are_redeliveries_to_acknowledge() -> None:
    delivery = continuing([node(3), node(4), node(5)], Position(committed=4, generation=1, resumed_at=1))
    assert seqs(delivery.fresh) == [5] and seqs(delivery.redelivered) == [3, 4]


def test_messages_of_an_earlier_consumer_are_ignored() -> None:
    delivery = continuing([node(5, generation=1), node(6, generation=2)], Position(committed=4, generation=2, resumed_at=1))
    assert delivery.fresh == [] and delivery.redelivered == [] and delivery.resume == 5


def test_a_gap_before_the_first_message_reads_again_from_the_committed_position() -> None:
    delivery = continuing([node(6), node(7)], Position(committed=4, generation=1, resumed_at=1))
    assert delivery.fresh == [] and delivery.resume == 5


def test_a_gap_inside_a_delivery_commits_what_precedes_it_and_reads_again_after() -> None:
    delivery = continuing([node(5), node(6), node(8)], Position(committed=4, generation=1, resumed_at=1))
    assert seqs(delivery.fresh) == [5, 6] and delivery.resume == 7


def test_a_sequence_still_missing_right_after_resuming_there_is_gone_from_the_stream() -> None:
    delivery = continuing([node(8), node(9)], Position(committed=4, generation=1, resumed_at=5))
    assert seqs(delivery.fresh) == [8, 9] and delivery.gone == (5, 3) and delivery.resume is None


def test_a_consumer_of_some_partitions_continues_the_log_across_the_other_partitions_holes() -> None:
    delivery = continuing([node(7), node(9), node(12)], Position(committed=4, generation=1, resumed_at=5, filtered=True))
    assert seqs(delivery.fresh) == [7, 9, 12] and delivery.resume is None and delivery.gone is None


def test_a_consumer_of_some_partitions_that_lost_a_delivery_commits_what_precedes_it_and_reads_again_after() -> None:
    lost_before = node(12)
    lost_before.after_gap = True  # its consumer sequence skips one: a delivery never arrived
    delivery = continuing([node(7), node(9), lost_before, node(13)], Position(committed=4, generation=1, resumed_at=5, filtered=True))
    assert seqs(delivery.fresh) == [7, 9] and delivery.resume == 10


def test_a_consumer_of_some_partitions_acknowledges_redeliveries_and_ignores_earlier_consumers() -> None:
    delivery = continuing([node(3), node(5, generation=0), node(7)], Position(committed=4, generation=1, resumed_at=5, filtered=True))
    assert seqs(delivery.fresh) == [7] and seqs(delivery.redelivered) == [3]


# -- decoding ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inbound", "reason"),
    [
        (message(1, b'{"type": "node.upserted", "id": '), "malformed JSON"),
        (message(1, {"type": "task.exploded", "id": "x", "ts": 1}), "unknown event type 'task.exploded'"),
        (
            message(1, {"type": "node.upserted", "id": "x", "ts": 1, "node": "n1", "capacity": {"vcore": "lots"}}),
            "node.upserted: vcore: 'lots' is not a quantity",
        ),
        (
            message(1, {"type": "node.upserted", "id": "x", "ts": 1, "node": "n1", "capacity": {}, "partition": "east"}),
            "published on preemptd.cluster.default.node but the event's partition is 'east'",
        ),
    ],
    ids=["malformed", "unknown type", "schema", "partition"],  # the subject's kind: below
)
def test_a_message_that_is_not_a_valid_event_for_its_subject_is_a_dead_letter(inbound: Inbound, reason: str) -> None:
    decoded = decode([inbound, node(2)], received=99)
    [dead] = decoded.dead
    assert dead.reason.startswith(reason) and dead.raw == inbound.data and dead.stream_seq == 1 and dead.received == 99
    assert [event.id for _, event in decoded.events] == ["n2"], "the next message is decoded as usual"


@pytest.mark.parametrize(
    ("subject", "reason"),
    [
        ("preemptd.cluster.default.task", "published on preemptd.cluster.default.task but a node.upserted event goes on preemptd.cluster.default.node"),
        (
            "preemptd.cluster.default.node.extra",
            "published on preemptd.cluster.default.node.extra but a node.upserted event goes on preemptd.cluster.default.node",
        ),
        (
            "preemptd.cluster.east.node",
            "published on preemptd.cluster.east.node but the event's partition is 'default': publish it on preemptd.cluster.default.node",
        ),
    ],
)
def test_an_event_whose_subject_disagrees_with_it_is_a_dead_letter(subject: str, reason: str) -> None:
    wrong = Inbound(subject, node(1).data, 1, handle=None)
    decoded = decode([wrong, node(2)], received=99)
    assert [dead.reason for dead in decoded.dead] == [reason]
    assert [event.id for _, event in decoded.events] == ["n2"]


# -- folding -------------------------------------------------------------------------------------


def test_events_become_records_numbered_after_the_state_with_their_bytes() -> None:
    state = ClusterState(log_id="abc")
    ingested = fold(decode([node(1), node(2)], received=50), known={}, state=state)
    assert [(row.seq, row.event_id, row.stream_seq, row.received) for row in ingested.rows] == [(1, "n1", 1, 50), (2, "n2", 2, 50)]
    assert ingested.rows[0].payload == node(1).data
    assert ingested.touched == {"default"} and ingested.dead == []
    assert state.seq == 2 and set(state.partitions["default"].nodes) == {"n1", "n2"}


def test_a_reused_id_is_a_dead_letter_naming_where_it_was_first() -> None:
    state = ClusterState(log_id="abc")
    ingested = fold(decode([node(1, "old"), node(2, "twice"), node(3, "twice")], received=50), known={"old": 17}, state=state)
    assert [row.event_id for row in ingested.rows] == ["twice"]
    assert [dead.reason for dead in ingested.dead] == [
        "duplicate id 'old': already in the log at seq 17; ids must be unique per event",
        "duplicate id 'twice': already in the log at seq 1; ids must be unique per event",
    ]


def test_ids_of_the_daemons_own_records_are_refused_from_shims() -> None:
    ingested = fold(decode([node(1, "abc:7.0")], received=50), known={}, state=ClusterState(log_id="abc"))
    assert ingested.rows == [] and "reserved for the daemon's ticks and decisions" in ingested.dead[0].reason


def test_an_event_the_fold_rejects_is_a_dead_letter_and_changes_nothing() -> None:
    state = ClusterState(log_id="abc")
    fold(decode([node(1)], received=50), known={}, state=state)
    before = snapshot(state)
    release = message(2, {"type": "task.released", "id": "r", "ts": 1, "task": "ghost"})
    ingested = fold(decode([release], received=50), known={}, state=state)
    assert ingested.rows == [] and ingested.touched == set()
    assert ingested.dead[0].reason == "unknown task 'ghost' in partition default" and ingested.dead[0].event_id == "r"
    assert snapshot(state) == before
    after = fold(decode([node(3)], received=50), known={}, state=state)
    assert [row.seq for row in after.rows] == [2], "no hole in the log where the rejected event was"


def test_configuration_warnings_are_returned_with_their_partition() -> None:
    config = message(
        1, {"type": "config.applied", "id": "c", "ts": 1, "partition": "east", "config": {"queues": [{"name": "a", "maxapplications": 3}]}}, partition="east"
    )
    ingested = fold(decode([config], received=50), known={}, state=ClusterState())
    assert ingested.touched == {"east"}
    assert ingested.warnings == [("east", "ignored (not used by preemptd): queue root.a: maxapplications")]


def test_an_error_of_ours_while_folding_ends_the_batch_at_that_event_as_a_dead_letter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug met while folding one event (not a rejection) must not stop ingest: the event is a
    dead letter saying so, and the batch ends there, since the state may be half-changed (the
    daemon rebuilds it from the log and reads the rest again)."""
    from preemptd.daemon import ingest

    def fold_with_a_bug(state: ClusterState, record) -> tuple[str, ...]:
        if record.event.id == "n2":
            raise ZeroDivisionError("division by zero")
        return apply(state, record)

    monkeypatch.setattr(ingest, "apply", fold_with_a_bug)
    bad = message(4, b'{"type": "node.upserted", "id": ')
    ingested = fold(decode([node(1), node(2), node(3), bad], received=50), known={}, state=ClusterState(log_id="abc"))
    assert [row.event_id for row in ingested.rows] == ["n1"]
    assert ingested.stopped is not None and ingested.stopped.stream_seq == 2
    assert [(dead.stream_seq, dead.event_id) for dead in ingested.dead] == [(2, "n2")], "nothing after it, even what failed to decode"
    assert ingested.dead[0].reason == "an error of preemptd's while folding it (ZeroDivisionError: division by zero); please report it"


def test_whatever_the_decoder_raises_makes_a_dead_letter(monkeypatch: pytest.MonkeyPatch) -> None:
    from preemptd.daemon import ingest

    def decoder_with_a_bug(raw: bytes):
        raise MemoryError("out of memory")

    monkeypatch.setattr(ingest, "decode_cluster_event", decoder_with_a_bug)
    decoded = decode([node(1)], received=50)
    assert decoded.events == [] and decoded.dead[0].reason == "cannot be decoded (MemoryError: out of memory); please report this message"


def test_an_event_that_would_make_a_partition_beyond_the_limit_is_a_dead_letter() -> None:
    """A shim inventing 10,000 partitions grew the state, the metrics (590,010 series) and the
    idle work without end."""
    state = ClusterState()
    first = fold(decode([node(1, partition="a"), node(2, partition="b")], received=50), known={}, state=state, max_partitions=2)
    assert not first.dead and sorted(state.partitions) == ["a", "b"]
    more = fold(decode([node(3, partition="c"), node(4, partition="a")], received=50), known={}, state=state, max_partitions=2)
    assert [d.kind for d in more.dead] == ["too_many_partitions"]
    assert more.dead[0].reason == "partition 'c' would be partition 3; this daemon keeps at most 2 (run --max-partitions)"
    assert sorted(state.partitions) == ["a", "b"] and len(more.rows) == 1, "the events of known partitions go on"


def test_configurations_read_before_the_fold_are_the_ones_it_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon reads a delivery's configurations off its event loop (a configuration's YAML
    may take a moment): the fold applies those readings, refusals included, and reads nothing
    again, even for more configurations than the projection keeps."""
    from preemptd.projections import _apply

    configs = [
        message(seq, {"type": "config.applied", "id": f"c{seq}", "ts": 1, "partition": "east", "config": {"queues": [{"name": f"q{seq}"}]}}, partition="east")
        for seq in range(1, 13)
    ]
    refused = message(
        13,
        {"type": "config.applied", "id": "c13", "ts": 1, "partition": "east", "config": {"queues": [{"name": "a", "resources": {"max": {"vcore": -1}}}]}},
        partition="east",
    )
    decoded = decode([*configs, refused], received=50)
    readings = read_configurations(decoded)
    assert sorted(readings) == list(range(13))

    def read_again(*args: object) -> None:
        raise AssertionError("read again on the event loop")

    monkeypatch.setattr(_apply, "_read", read_again)
    state = ClusterState()
    ingested = fold(decoded, known={}, state=state, readings=readings)
    assert [row.event_id for row in ingested.rows] == [f"c{seq}" for seq in range(1, 13)]
    assert [dead.event_id for dead in ingested.dead] == ["c13"] and ingested.dead[0].reason.startswith("configuration refused, the previous one stays: ")
    assert "root.q12" in state.partitions["east"].queues
