"""Configuration files (`run --config`): one `config.applied` per partition they set up, and at
start only for the partitions whose configuration would change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from builders import fold_events

from preemptd.daemon.config_file import changed, config_events
from preemptd.daemon.errors import UsageError

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


def test_only_the_partitions_the_file_would_change_are_applied_again(tmp_path: Path) -> None:
    state = fold_events(*config_events(write(tmp_path, TWO_PARTITIONS), now=5))
    same = config_events(write(tmp_path, "# the same, written otherwise\n" + TWO_PARTITIONS.replace("{name: b}", "{name: 'b'}")), now=6)
    assert [changed(state, e) for e in same] == [False, False]
    bigger = config_events(write(tmp_path, TWO_PARTITIONS.replace("vcore: 2", "vcore: 3")), now=7)
    assert [changed(state, e) for e in bigger] == [True, False]


def test_a_partition_not_configured_yet_is_applied(tmp_path: Path) -> None:
    [event] = config_events(write(tmp_path, "queues: [{name: a}]\n"), now=5)
    assert changed(fold_events(), event)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[a, b]\n", "expected a configuration document (yunikorn's, or {model, config}; a list of objects goes in `config`)"),
        ("model: slurm\nconfig: {}\n", "model 'slurm' is not supported by this version (supported: "),
        ("model: yunikorn\n", "with `model`, the file needs a `config` (the yunikorn model's configuration)"),
        ("model: yunikorn\nconfig: [a]\n", "partition default: the configuration must be an object (YuniKorn queues.yaml)"),
        ("queues: [{name: a, resources: {guarenteed: {vcore: 1}}}]\n", "partition default: queue root.a resources: unknown field guarenteed (did you mean guaranteed?)"),
    ],
)
def test_a_file_that_cannot_be_used_is_one_line_saying_why(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        config_events(write(tmp_path, text), now=5)
