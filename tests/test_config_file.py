"""Configuration files (`run --config`): one `config.applied` per partition they set up, saying
the file and its digest; at start, only for the partitions where the file last applied other
content (or never did), so that no restart undoes a newer configuration."""

from __future__ import annotations

import hashlib
import re
import tracemalloc
from pathlib import Path

import msgspec
import pytest
from builders import fold_events

from preemptd.daemon.config_file import _changes, config_events
from preemptd.daemon.errors import UsageError
from preemptd.events import ConfigError
from preemptd.scheduling import yaml_documents

TWO_PARTITIONS = """\
partitions:
  - name: east
    queues: [{name: root, queues: [{name: a, resources: {guaranteed: {vcore: 2}}}]}]
  - name: west
    queues: [{name: root, queues: [{name: b}]}]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "queues.yaml"
    path.write_text(text)
    return path


def test_a_file_gives_one_event_per_partition_it_sets_up(tmp_path: Path) -> None:
    events = config_events(write(tmp_path, TWO_PARTITIONS), now=5)
    assert [(e.partition, e.model, e.ts) for e in events] == [("east", "yunikorn", 5), ("west", "yunikorn", 5)]


def test_a_file_is_applied_again_only_once_its_content_changed(tmp_path: Path) -> None:
    """A daemon restarted (or a standby taking over) with a file it already applied left a
    newer configuration (from `preemptd apply`, a shim) undone: the file went back in. Now what
    the file last applied is kept with the configuration (its path and digest), and the file
    goes in only when it changed."""
    path = write(tmp_path, TWO_PARTITIONS)
    first = config_events(path, now=5)
    assert {(e.source, e.digest) for e in first} == {(str(path.absolute()), hashlib.sha256(TWO_PARTITIONS.encode()).hexdigest())}
    state = fold_events(*first)
    newer = TWO_PARTITIONS.replace("vcore: 2", "vcore: 24")
    state = fold_events(*first, *[msgspec.structs.replace(e, source=msgspec.UNSET, digest=msgspec.UNSET) for e in config_events(write(tmp_path, newer), now=6)])
    appended, kept = _changes(write(tmp_path, TWO_PARTITIONS), 7, state)
    assert (appended, [e.partition for e in kept]) == ([], ["east", "west"]), "unchanged since it applied it: the newer stays"
    appended, kept = _changes(write(tmp_path, "# edited\n" + TWO_PARTITIONS), 8, state)
    assert [e.partition for e, _ in appended] == ["east", "west"] and kept == []


def test_a_partition_not_configured_yet_is_applied(tmp_path: Path) -> None:
    appended, kept = _changes(write(tmp_path, "queues: [{name: a}]\n"), 5, fold_events())
    assert len(appended) == 1 and kept == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[a, b]\n", "object 1: expected a Kubernetes object (apiVersion, kind, metadata, ...), got a string"),
        ("model: slurm\nconfig: {}\n", "model 'slurm' is not supported by this version (supported: "),
        ("model: yunikorn\n", "with `model`, the file needs a `config`, or the yunikorn model's objects as the documents that follow"),
        ("model: yunikorn\nconfig: [a]\n", "object 1: expected a Kubernetes object (apiVersion, kind, metadata, ...), got a string"),
        (
            "queues: [{name: a, resources: {guarenteed: {vcore: 1}}}]\n",
            "queues.yaml: queue root.a resources: unknown field guarenteed (did you mean guaranteed?)",
        ),
        ("42\n", "expected a configuration document (yunikorn's, or {model, config}; a list of objects goes in `config`), got 42"),
    ],
)
def test_a_file_that_cannot_be_used_is_one_line_saying_why(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        config_events(write(tmp_path, text), now=5)


EXAMPLES = Path(__file__).parent.parent / "examples" / "cluster"


@pytest.mark.parametrize(("name", "model"), [("kueue", "kueue"), ("volcano", "volcano")])
def test_a_users_own_objects_go_in_unchanged_after_a_model_line(name: str, model: str) -> None:
    [event] = config_events(EXAMPLES / f"{name}.yaml", now=5)
    assert (event.model, event.partition) == (model, "default")
    state = fold_events(event)
    partition = state.partitions["default"]
    assert partition.model == model
    assert sorted(partition.defined_classes) == (["experiment", "production"] if model == "kueue" else ["high", "low"])
    if model == "kueue":
        assert sorted(partition.settings.cluster_queues) == ["batch", "language", "notebooks", "serving", "vision"]
        assert partition.settings.fair_sharing.enabled, "the manager ConfigMap turns fair sharing on"
        assert partition.aliases["vision/training"] == "vision"
    else:
        assert partition.settings.scheduler.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")
        assert not partition.settings.queues["training"].reclaimable


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: a}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: "
            "LocalQueue\nmetadata: {name: b}\nspec: {clusterQueue: a}\n",
            "these are kueue objects, and the file names no model: add a first YAML document `model: kueue` (then `---`), or wrap them as {model: "
            "kueue, config: [...]}",
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}}\n",
            "these are volcano objects, and the file names no model: add a first YAML document `model: volcano`",
        ),
        ("config:\n- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ClusterQueue, metadata: {name: a}}\n", "`config` needs `model` beside it (model: kueue)"),
        ("modle: kueue\nconfig: []\n", "`config` needs `model` beside it"),
        ("modle: kueue\n", "unknown field 'modle' (did you mean model?); without `model:` the file is the yunikorn model's configuration"),
        ("model: kueue\nconfg: []\n", "unknown field 'confg' (did you mean config?) beside `model`"),
        (
            "model: kueue\nconfig: []\n---\n{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: f}}\n",
            "the file gives `config` and 1 more YAML documents",
        ),
        (
            "model: kueue\n---\n- {apiVersion: kueue.x-k8s.io/v1beta2, kind: ClusterQueue, metadata: {name: a}, spec: {resourceGroups: "
            "[{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuoat: 48}]}]}]}}\n",
            "ClusterQueue a: unknown field spec.resourceGroups[0].flavors[0].resources[0].nominalQuoat (did you mean nominalQuota?)",
        ),
        ("model: kueue\n---\nkind: [unclosed\n", "queues.yaml is not YAML: while parsing a flow sequence in"),
    ],
)
def test_a_file_of_objects_says_what_is_wrong_in_its_own_words(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError) as refused:
        config_events(write(tmp_path, text), now=5)
    assert message in str(refused.value)
    assert "<unicode string>" not in str(refused.value)


def test_a_multi_document_file_gives_the_objects_as_one_list(tmp_path: Path) -> None:
    text = "model: volcano\n---\n{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}}\n---\n{actions: 'allocate, reclaim'}\n"
    [event] = config_events(write(tmp_path, text), now=5)
    assert event.config == [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}}, {"actions": "allocate, reclaim"}]


def test_a_configuration_file_has_the_bounds_of_a_shims_config_applied(tmp_path: Path) -> None:
    """A file parsed for minutes on the daemon's only thread: its configuration is held to the
    1 MiB a shim's config.applied may have, and its text to 8 MiB."""
    queues = ",".join(f"{{name: q{i:06}, resources: {{guaranteed: {{vcore: 1, memory: 1Gi, nvidia.com/gpu: 1}}}}}}" for i in range(12_000))
    with pytest.raises(
        UsageError, match=r"queues.yaml: the configuration is [\d,]+ bytes as JSON; the limit is 1,048,576 bytes, as for a shim's config.applied"
    ):
        config_events(write(tmp_path, f"queues: [{{name: root, queues: [{queues}]}}]\n"), now=5)
    with pytest.raises(UsageError, match=r"queues.yaml: more than 8,388,608 bytes; a configuration file is at most 8,388,608 bytes"):
        config_events(write(tmp_path, "# " + "x" * (9 << 20) + "\nqueues: []\n"), now=5)


def test_yaml_beyond_the_value_limit_is_refused_before_it_is_built() -> None:
    """An 8 MiB file took 159 s and 2.8 GB before its values were counted: the count stops the
    reading at the first value past the limit, so memory stays near the text's own size."""
    text = "- x\n" * (1 << 18)  # 1 MiB, 262,144 values
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=r"^big.yaml holds more than 100,000 values, counting what its aliases repeat$"):
            yaml_documents(text, "big.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
