"""The contract: quantities, durations, every event type through the codec and the JSON Schema,
and decode errors that name the event type and the field at fault."""

from __future__ import annotations

import jsonschema
import msgspec
import pytest
from hypothesis import given, strategies as st

from preemptd import events as ev
from preemptd.events import (
    CLUSTER_EVENT_TYPES,
    DECISION_TYPES,
    DecodeError,
    QuantityError,
    Resources,
    decode_cluster_event,
    decode_decision,
    decode_log_event,
    encode,
    json_schema,
    parse_duration,
    parse_quantity,
    to_builtins,
)

R = Resources.parse


@pytest.mark.parametrize(
    ("resource", "value", "amount"),
    [
        ("cpu", "500m", 500),
        ("cpu", 2, 2000),
        ("vcore", "1.5", 1500),
        ("cpu", 0.25, 250),
        ("memory", "2Gi", 2 * 2**30),
        ("memory", "1.5Gi", 3 * 2**29),
        ("memory", "1k", 1000),
        ("memory", "1M", 10**6),
        ("pods", "1e3", 1000),
        ("nvidia.com/gpu", 4, 4),
        ("memory", "+3", 3),
        ("memory", "1E", 10**18),
    ],
)
def test_quantities_parse_to_exact_canonical_integers(resource: str, value: object, amount: int) -> None:
    assert parse_quantity(resource, value) == amount


@pytest.mark.parametrize(
    ("resource", "value", "message"),
    [
        ("cpu", "0.1m", "finer than the smallest unit (1m)"),
        ("pods", "0.5", "finer than the smallest unit (1)"),
        ("memory", "-1", "negative"),
        ("cpu", "abc", "is not a quantity"),
        ("cpu", "5 cores", "is not a quantity"),
        ("cpu", True, "expected a number or a quantity string"),
        ("cpu", None, "expected a number or a quantity string"),
    ],
)
def test_bad_quantities_say_what_is_wrong(resource: str, value: object, message: str) -> None:
    with pytest.raises(QuantityError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_quantity(resource, value)


@given(st.sampled_from(["cpu", "vcore", "memory", "pods", "nvidia.com/gpu"]), st.integers(min_value=0, max_value=ev.MAX_QUANTITY))
def test_resources_round_trip_through_wire_notation(name: str, amount: int) -> None:
    resources = Resources({name: amount})
    assert Resources.parse(resources.to_wire()) == resources


@pytest.mark.parametrize(("text", "ms"), [("30s", 30_000), ("1m30s", 90_000), ("250ms", 250), ("1.5s", 1500), ("2h", 7_200_000), ("0", 0), (0, 0)])
def test_go_durations_become_milliseconds(text: object, ms: int) -> None:
    assert parse_duration(text) == ms
    if ms:
        assert parse_duration(ev.format_duration(ms)) == ms


@pytest.mark.parametrize("text", ["10", "abc", "1x", "5s5", "", "1.0001ms"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ev.DurationError):
        parse_duration(text)


VICTIM = ev.Victim(task="a-1", app="a", queue="root.a", node="n1", priority=0, resources=R({"vcore": 1}), why="over guarantee")
CLUSTER_EXAMPLES = [
    ev.ConfigApplied(id="1", ts=1, model="yunikorn", config={"queues": [{"name": "root", "queues": [{"name": "a"}]}]}),
    ev.PriorityClassUpserted(id="2", ts=1, name="high", value=1000, preemption_policy="Never", allow_preemption=False),
    ev.PriorityClassDeleted(id="3", ts=1, name="high"),
    ev.NodeUpserted(id="4", ts=1, partition="gpu", node="n1", capacity=R({"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": 8}), labels={"zone": "a"}),
    ev.NodeRemoved(id="5", ts=1, node="n1"),
    ev.AppSubmitted(id="6", ts=1, app="a", queue="root.a", priority_class="high", min_available=4),
    ev.AppFinished(id="7", ts=1, app="a"),
    ev.TaskSubmitted(
        id="8",
        ts=1,
        task="a-1",
        app="a",
        queue="root.a",
        resources=R({"cpu": "500m", "memory": "1Gi"}),
        priority=10,
        allow_preemption=False,
        preemption_policy="Never",
        originator=True,
        required_node="n1",
        task_priority=3,
        preemptable=False,
    ),
    ev.TaskBound(id="9", ts=1, task="a-2", node="n1", app="a", queue="root.a", resources=R({"cpu": 1})),
    ev.TaskReleased(id="10", ts=1, task="a-1", reason="preempted"),
]
DECISION_EXAMPLES = [
    ev.Allocated(
        id="l:1.0", ts=1, partition="default", cycle=1, task="a-1", app="a", queue="root.a", node="n1", resources=R({"cpu": 1}), explanation=("fits",)
    ),
    ev.Preempted(
        id="l:1.1",
        ts=1,
        partition="default",
        cycle=1,
        preemptor="b-1",
        app="b",
        queue="root.b",
        node="n1",
        resources=R({"vcore": 1}),
        victims=(VICTIM,),
        model="yunikorn",
        reason="guarantee",
        grace_period=30_000,
        explanation=("law 4: root.b is under its guarantee",),
    ),
    ev.QuotaEnforced(
        id="l:1.4",
        ts=1,
        partition="default",
        cycle=1,
        queue="root.b",
        max=R({"vcore": 4}),
        target=R({"vcore": 2}),
        victims=(VICTIM,),
        short=R({"vcore": 1}),
        model="yunikorn",
        reason="quota",
        explanation=("root.b's max went from vcore 8 to vcore 4",),
    ),  # fmt: skip
    ev.Admitted(id="l:1.2", ts=1, partition="default", cycle=1, app="w", queue="cq", flavors={"cpu": "spot"}),
    ev.Evicted(
        id="l:1.3", ts=1, partition="default", cycle=1, app="w", queue="cq", reason="InCohortReclamation", preemptor="v", message="preempted to admit v"
    ),
    ev.Unreserved(id="l:1.4", ts=1, partition="default", cycle=1, task="b-1", node="n1", reason="node removed"),
    ev.Blocked(id="l:1.5", ts=1, partition="default", cycle=1, task="c-1", app="c", queue="root.c", reasons=("law 4: root.c is at its guarantee for vcore",)),
]


def test_a_configuration_may_be_a_list_of_objects() -> None:
    """Kueue's configuration is a list of Kubernetes objects: it travels as one."""
    event = ev.ConfigApplied(
        id="k", ts=1, model="kueue", config=[{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}]
    )
    assert decode_cluster_event(encode(event)) == event


def test_the_examples_cover_every_event_and_decision_type() -> None:
    assert sorted(e.__struct_config__.tag for e in CLUSTER_EXAMPLES) == sorted(CLUSTER_EVENT_TYPES)
    assert sorted(d.__struct_config__.tag for d in DECISION_EXAMPLES) == sorted(DECISION_TYPES)


@pytest.mark.parametrize("event", CLUSTER_EXAMPLES, ids=lambda e: e.__struct_config__.tag)
def test_cluster_events_round_trip(event: object) -> None:
    assert decode_cluster_event(encode(event)) == event
    assert decode_log_event(encode(event)) == event


@pytest.mark.parametrize("decision", DECISION_EXAMPLES, ids=lambda d: d.__struct_config__.tag)
def test_decisions_round_trip(decision: object) -> None:
    assert decode_decision(encode(decision)) == decision
    assert decode_log_event(encode(decision)) == decision


def test_ticks_round_trip_in_the_log_but_are_refused_from_shims() -> None:
    tick = ev.Tick(id="tick-5", ts=7, partition="p")
    assert decode_log_event(encode(tick)) == tick
    with pytest.raises(DecodeError, match="written by the daemon"):
        decode_cluster_event(encode(tick))


@pytest.mark.parametrize("event", CLUSTER_EXAMPLES, ids=lambda e: e.__struct_config__.tag)
def test_the_json_schema_accepts_every_cluster_event(event: object) -> None:
    jsonschema.validate(to_builtins(event), json_schema("cluster"))


@pytest.mark.parametrize("decision", DECISION_EXAMPLES, ids=lambda d: d.__struct_config__.tag)
def test_the_json_schema_accepts_every_decision(decision: object) -> None:
    jsonschema.validate(to_builtins(decision), json_schema("decisions"))


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "task.submitted", "id": "1", "ts": 1, "app": "a", "resources": {"cpu": 1}},  # no task
        {"type": "node.upserted", "id": "1", "ts": 1, "node": "n", "capacity": {"cpu": "lots"}},
        {"type": "node.upserted", "id": "1", "ts": 1, "node": "n", "capacity": {"cpu": -1}},
        {"type": "node.removed", "id": "1", "ts": 1, "node": "n", "partition": "a.b"},
        {"type": "nope", "id": "1", "ts": 1},
    ],
)
def test_the_json_schema_refuses_what_the_decoder_refuses(bad: dict) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, json_schema("cluster"))
    with pytest.raises(DecodeError):
        decode_cluster_event(msgspec.json.encode(bad))


@pytest.mark.parametrize(
    ("raw", "event_type", "words"),
    [
        (b'{"type":"task.submitted","id":"1","ts":1,"app":"a","resources":{"cpu":1}}', "task.submitted", ["task.submitted", "`task`"]),
        (b'{"type":"task.submitted","id":"1","ts":1,"task":5,"app":"a","resources":{"cpu":1}}', "task.submitted", ["task.submitted", "$.task"]),
        (b'{"type":"node.upserted","id":"1","ts":1,"node":"n","capacity":{"cpu":"2 cores"}}', "node.upserted", ["node.upserted", "$.capacity", "cpu"]),
        (b'{"type":"nope","id":"1"}', "nope", ["unknown event type 'nope'", "task.submitted"]),
        (b'{"type":"task.submited","id":"1"}', "task.submited", ["unknown event type 'task.submited' (did you mean task.submitted?)"]),
        (b'{"id":"1"}', None, ["missing field `type`"]),
        (b'{"type": "task.submitted", "id": ', None, ["malformed JSON"]),
        (b"[1, 2]", None, ["expected a JSON object"]),
        (b'{"type":"decision.allocated"}', "decision.allocated", ["written by the daemon"]),
        (b"  ", None, ["empty message"]),
    ],
)
def test_decode_errors_name_the_type_and_the_field(raw: bytes, event_type: str | None, words: list[str]) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_cluster_event(raw)
    assert caught.value.event_type == event_type
    for word in words:
        assert word in caught.value.reason


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ('"resorces":{"cpu":1}', "task.submitted: unknown field `resorces` (did you mean `resources`?)"),
        ('"Resources":{"cpu":1}', "task.submitted: unknown field `Resources` (did you mean `resources`?)"),
        ('"requests":{"cpu":1}', "task.submitted: unknown field `requests` (did you mean `resources`?)"),  # a pod's word for it
        ('"queue":"q"', "task.submitted: missing field `resources`"),
    ],
)
def test_a_misspelt_or_missing_field_is_named_with_the_field_meant(fields: str, reason: str) -> None:
    raw = f'{{"type":"task.submitted","id":"1","ts":1,"task":"t","app":"a",{fields}}}'.encode()
    with pytest.raises(DecodeError) as caught:
        decode_cluster_event(raw)
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    ("raw", "event_id"),
    [
        (b'{"type":"task.submitted","id":"sub-7","ts":1,"task":5,"app":"a","resources":{"cpu":1}}', "sub-7"),
        (b'{"type":"nope","id":"n-1"}', "n-1"),
        (b'{"id":"x-1"}', "x-1"),
        (b'{"type":"nope","id":7}', None),
        (b'{"type": "task.submitted", "id": ', None),
    ],
)
def test_a_decode_error_names_the_event_id_when_it_can_be_read(raw: bytes, event_id: str | None) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_cluster_event(raw)
    assert caught.value.event_id == event_id


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ('"type":"app.submitted","app":"a","queue":"q","minAvailable":4', "app.submitted: unknown field `minAvailable` (did you mean `min_available`?)"),
        ('"type":"app.submitted","app":"a","queue":"q","minMember":4', "app.submitted: unknown field `minMember` (did you mean `min_available`?)"),
        (
            '"type":"app.submitted","app":"a","queue":"q","priorityClassName":"high"',
            "app.submitted: unknown field `priorityClassName` (did you mean `priority_class`?)",
        ),
        (
            '"type":"task.submitted","task":"t","app":"a","resources":{},"requiredNode":"n"',
            "task.submitted: unknown field `requiredNode` (did you mean `required_node`?)",
        ),
        ('"type":"node.upserted","node":"n","capacity":{},"allocatable":{}', "node.upserted: unknown field `allocatable` (did you mean `capacity`?)"),
        (
            '"type":"node.removed","node":"n","uid":"8d2f"',
            "node.removed: unknown field `uid` (node.removed has: id, ts, partition, annotations, node; a shim's own data goes in `annotations`)",
        ),
    ],
)
def test_a_field_the_contract_does_not_define_is_refused_with_the_field_meant(fields: str, reason: str) -> None:
    """Dropped silently, `minAvailable` would run a gang job without its gang."""
    with pytest.raises(DecodeError) as refused:
        decode_cluster_event(f'{{"id":"1","ts":1,{fields}}}'.encode())
    assert refused.value.reason == reason


def test_a_shims_own_data_goes_in_annotations_kept_and_never_read() -> None:
    raw = b'{"type":"node.removed","id":"1","ts":1,"node":"n","annotations":{"k8s.io/uid":"8d2f","trace":"x"}}'
    assert decode_cluster_event(raw) == ev.NodeRemoved(id="1", ts=1, node="n", annotations={"k8s.io/uid": "8d2f", "trace": "x"})
    with pytest.raises(DecodeError, match=r"an integer where a string is expected - at `\$.annotations\['trace'\]`"):
        decode_cluster_event(raw.replace(b'"x"', b"7"))


def test_a_log_written_when_unknown_fields_were_dropped_still_reads_as_it_did() -> None:
    assert ev.decode_log_event(b'{"type":"node.removed","id":"1","ts":1,"node":"n","color":"blue"}') == ev.NodeRemoved(id="1", ts=1, node="n")
    blocked = ev.Blocked(id="log:1.1", ts=1, partition="default", cycle=1, task="t", app="a", queue="root.a", reasons=("r",))
    assert ev.decode_log_event(encode(blocked)[:-1] + b',"colour":"red"}') == blocked, "a decision too"
    with pytest.raises(DecodeError, match=r"task.released: an integer where a string is expected - at `\$.task`") as wrong:
        ev.decode_log_event(b'{"type":"task.released","id":"x","ts":1,"colour":"red","task":5}')
    assert (wrong.value.event_type, wrong.value.event_id) == ("task.released", "x"), "the record is named, as any refusal names it"


JSON_SCHEMA_2020_KEYWORDS = {
    "$schema", "$id", "$ref", "$defs", "$comment", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary",
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "if", "then", "else",
    "properties", "patternProperties", "additionalProperties", "propertyNames", "required", "minProperties", "maxProperties",
    "dependentRequired", "dependentSchemas",
    "items", "prefixItems", "contains", "minItems", "maxItems", "uniqueItems", "minContains", "maxContains", "unevaluatedItems", "unevaluatedProperties",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType",
}  # fmt: skip


def _keywords(schema: object, under_names: bool = False) -> set[str]:
    """Every keyword a schema uses (the names under `properties` and `$defs` are not keywords)."""
    if isinstance(schema, list):
        return set().union(*(_keywords(item) for item in schema))
    if not isinstance(schema, dict):
        return set()
    found = set() if under_names else set(schema)
    for key, value in schema.items():
        found |= _keywords(value, under_names=not under_names and key in ("properties", "$defs", "patternProperties", "dependentSchemas"))
    return found


@pytest.mark.parametrize("kind", ["cluster", "decisions"])
def test_the_schema_uses_json_schemas_own_keywords_only_as_strict_validators_require(kind: str) -> None:
    """ajv's default strict mode refuses a keyword JSON Schema does not define (msgspec's
    `discriminator` is OpenAPI's); tests/test_cli.py compiles it with ajv itself."""
    schema = ev.json_schema(kind, models=["yunikorn"])
    assert _keywords(schema) <= JSON_SCHEMA_2020_KEYWORDS, _keywords(schema) - JSON_SCHEMA_2020_KEYWORDS


def test_the_schema_of_cluster_events_allows_no_field_the_contract_does_not_define() -> None:
    schema = ev.json_schema("cluster")
    events = [schema["$defs"][ref["$ref"].rsplit("/", 1)[1]] for ref in schema["anyOf"]]
    assert len(events) == len(ev.CLUSTER_EVENT_TYPES)
    assert all(event["additionalProperties"] is False and "annotations" in event["properties"] for event in events)


def test_a_decision_within_the_budget_is_encoded_whole() -> None:
    decision = DECISION_EXAMPLES[0]
    assert ev.encode_within(decision, 10_000) == ev.encode(decision)


def test_a_decision_beyond_the_budget_is_cut_saying_what_it_left_out_and_where_the_whole_is() -> None:
    victims = tuple(
        ev.Victim(task=f"v{i}", app="b", queue="root.b", node="n1", priority=0, resources=ev.Resources({"vcore": 1000}), why="over its guarantee " * 50)
        for i in range(100)
    )
    big = ev.Preempted(
        id="log:7.0", ts=1, partition="default", cycle=7, preemptor="a-1", app="a", queue="root.a", node="n1",
        resources=ev.Resources({"vcore": 100_000}), victims=victims, model="yunikorn", reason="guarantee", explanation=("checked " * 100,) * 500,
    )  # fmt: skip
    data = ev.encode_within(big, 32_768)
    assert data is not None and len(ev.encode(big)) > 32_768 >= len(data)
    cut = ev.decode_decision(data)
    assert [v.task for v in cut.victims] == [v.task for v in victims], "every victim stays: the shim needs them all"
    assert cut.explanation[-1] == "... 495 more lines: preemptd explain log:7.0"
    assert cut.victims[0].why.endswith("more characters)")
    assert ev.encode_within(big, 2_000) is None, "a hundred victims cannot fit in 2 kB"


@pytest.mark.parametrize("value", ["1e1000000", "1E+999999999", "1e-999999", "0." + "0" * 100_000 + "1", "1" + "0" * 100_000])
def test_a_quantity_out_of_any_range_is_a_refusal_never_an_arithmetic_error(value: str) -> None:
    assert ev.parse_quantity("memory", "0e999999") == 0, "zero is zero, whatever its exponent"
    """The decimal module's Overflow escaped the parser: an internal dead letter, a rebuild of the
    state from the log for each such message, a traceback from run --config."""
    with pytest.raises(ev.QuantityError, match="memory: .*(out of range|the limit|finer than)"):
        ev.parse_quantity("memory", value)
    with pytest.raises(DecodeError, match="out of range|the limit|finer than"):
        decode_cluster_event(f'{{"type":"node.upserted","id":"1","ts":1,"node":"n","capacity":{{"memory":"{value}"}}}}'.encode())
