"""A refused message's reason is preemptd's own (events/_faults.py), not msgspec's, whose wording
changes between its releases (0.23 reworded a dead letter's reason a shim reads): the walk of
the document finds exactly what msgspec refuses, and says it in words that stay."""

from __future__ import annotations

import json
import random

import msgspec
import pytest
from test_fuzz import mutate, valid_events

from preemptd.events import CLUSTER_EVENT_TYPES, DecodeError, decode_cluster_event
from preemptd.events._codec import _BY_TYPE_NAME, _dec_hook
from preemptd.events._faults import first_fault

#: What msgspec says (some release of it): none of it may reach a shim.
MSGSPEC_WORDS = ("Expected `", "Object contains", "Object missing", "JSON is malformed", "Input data was truncated", "Number out of range", "Invalid UTF-8")


@pytest.mark.parametrize("seed", range(4))
def test_the_walk_refuses_exactly_what_msgspec_refuses_and_says_it_in_our_words(seed: int) -> None:
    rng = random.Random(seed)
    compared = refused = 0
    for _ in range(5_000):
        document = mutate(rng, rng.choice(valid_events(rng)))
        if document.get("type") not in CLUSTER_EVENT_TYPES or "<deep" in json.dumps(document):
            continue
        document.setdefault("id", "e1")
        document.setdefault("ts", 1)
        raw = json.dumps(document).encode()
        event_type = _BY_TYPE_NAME[document["type"]]
        try:
            msgspec.json.decode(raw, type=event_type, dec_hook=_dec_hook)
            accepted = True
        except msgspec.ValidationError:
            accepted = False
        fault = first_fault(document, event_type)
        assert (fault is None) == accepted, f"seed {seed}: {raw[:300]!r}: msgspec {'accepts' if accepted else 'refuses'}, the walk says {fault}"
        if not accepted:
            with pytest.raises(DecodeError) as why:
                decode_cluster_event(raw)
            assert not any(words in why.value.reason for words in MSGSPEC_WORDS), why.value.reason
            refused += 1
        compared += 1
    assert compared > 1_000 and refused > 300, (compared, refused)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"type": "node.removed", "id": "1", "ts": 1, "node": "n1"', "malformed JSON: expecting ',' delimiter at line 1, column 58"),
        (b'{"type": "node.removed", "id": "1", "ts": NaN, "node": "n1"}', "malformed JSON: NaN, Infinity"),
        (b'{"type": "node.removed", "id": "1", "ts": 1, "node": "\xc3("}', "not UTF-8: byte b'\\xc3' in a string"),
        (b'{"type": "node.removed", "id": "1", "ts": 1.5, "node": "n1"}', "node.removed: a number where an integer is expected - at `$.ts`"),
        (b'{"type": "node.removed", "id": "", "ts": 1, "node": "n1"}', "node.removed: an empty string - at `$.id`"),
        (
            b'{"type": "node.removed", "id": "1", "ts": 1, "node": "n1", "partition": "a b"}',
            "node.removed: 'a b' does not match ^[A-Za-z0-9_-]{1,64}$ - at `$.partition`",
        ),
        (b'{"type": "node.removed", "id": "1", "ts": 1, "nodeName": "n1"}', "node.removed: unknown field `nodeName` (did you mean `node`?)"),
        (b'{"type": "node.upserted", "id": "1", "ts": 1, "node": "n1", "capacity": {"vcore": "lots"}}', "node.upserted: vcore: 'lots' is not a quantity"),
        (
            b'{"type": "node.upserted", "id": "1", "ts": 1, "node": "n1", "capacity": {}, "labels": {"a": 1}}',
            "an integer where a string is expected - at `$.labels['a']`",
        ),
        (
            b'{"type": "priorityclass.upserted", "id": "1", "ts": 1, "name": "p", "value": 1, "allow_preemption": "yes"}',
            "a string where true or false is expected",
        ),
    ],
    ids=["truncated", "nan", "utf-8", "float ts", "empty id", "pattern", "kubernetes word", "quantity", "label value", "boolean"],
)
def test_a_refusal_says_what_and_where_in_our_words(raw: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as refused:
        decode_cluster_event(raw)
    assert reason in refused.value.reason
