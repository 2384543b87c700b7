"""Untrusted text never acts on the terminal: names, reasons and payloads come from shims, and
`dead-letters`, `explain`, `tail`, `state` and the logs show control characters, escape
sequences and bidirectional overrides escaped, never raw. `--json` stays exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import preemptd

from preemptd.daemon.cli import render
from preemptd.daemon.operations.logs import _logfmt_value
from preemptd.events import Allocated, Resources
from preemptd.projections import Words

HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202etxt.exe\u2066\u200b\u2028\x9b31m\x7f"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain-name_1.2", "plain-name_1.2"),
        ("名前 🚀 café", "名前 🚀 café"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("bell\x07 nul\x00 del\x7f", "bell\\x07 nul\\x00 del\\x7f"),
        ("csi\x9b31m", "csi\\x9b31m"),
        ("\u202eexe.txt \u2066isolate\u2069 \u200fmark", "\\u202eexe.txt \\u2066isolate\\u2069 \\u200fmark"),
        ("zero\u200bwidth line\u2028break\nnewline", "zero\\u200bwidth line\\u2028break\\nnewline"),
    ],
)
def test_printable_escapes_what_could_act_on_a_terminal_and_keeps_the_rest(text: str, shown: str) -> None:
    assert render.printable(text) == shown


def test_a_decision_summary_shows_hostile_names_escaped() -> None:
    decision = Allocated(id="x:1.0", ts=0, partition="default", cycle=1, task=HOSTILE, app="a", queue="root.q", node="n1", resources=Resources({HOSTILE: 1}))
    for text in (render.summary(decision), render.explanation(decision, 1, Words())):
        assert not any(ch in text for ch in "\x1b\x07\u202e\u2066\u200b\u2028\x9b\x7f")
        assert "\\x1b]0;owned\\x07" in text


def test_logs_quote_and_escape_values_with_anything_but_printable_ascii() -> None:
    assert _logfmt_value("plain") == "plain"
    assert _logfmt_value(HOSTILE) == json.dumps(HOSTILE)
    assert not any(ch in _logfmt_value(HOSTILE) for ch in "\x1b\u202e")


@pytest.fixture(scope="module")
def hostile_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    events = [
        {"type": "node.upserted", "node": f"n-{HOSTILE}", "capacity": {"vcore": 2, f"x-{HOSTILE}": 1}},
        {"type": "task.submitted", "task": f"t-{HOSTILE}", "app": f"a-{HOSTILE}", "queue": "root.default", "resources": {"vcore": 1}},
        {"type": "task.released", "task": f"ghost-{HOSTILE}"},
    ]
    scenario = {"name": "hostile", "config": {}, "events": events, "until": "2s", "expect": {"rejected": ["unknown task"]}}
    (folder / "hostile.yaml").write_text(json.dumps(scenario))
    db = folder / "hostile.db"
    made = preemptd("simulate", str(folder / "hostile.yaml"), "--quiet", "--db", str(db))
    assert made.returncode == 0, made.stderr
    assert "\x1b" not in made.stderr and "\\x1b" in made.stderr, "the rejection is shown escaped"
    return db


@pytest.mark.parametrize("command", [["explain", "--task", f"t-{HOSTILE}"], ["state"]])
def test_explain_and_state_show_hostile_names_escaped(hostile_log: Path, command: list[str]) -> None:
    shown = preemptd(*command, "--db", str(hostile_log))
    assert shown.returncode == 0, shown.stderr
    assert "\\x1b]0;owned\\x07" in shown.stdout
    assert not any(ch in shown.stdout for ch in "\x1b\x07\u202e\u2066\u200b\u2028\x9b\x7f")


def test_json_output_stays_exact(hostile_log: Path) -> None:
    shown = preemptd("explain", "--task", f"t-{HOSTILE}", "--db", str(hostile_log), "--json")
    assert json.loads(shown.stdout.splitlines()[0])["task"] == f"t-{HOSTILE}"


def test_a_dead_letter_shows_what_was_sent_escaped() -> None:
    from preemptd.daemon.records import DeadLetter

    dead = DeadLetter(
        received=0, subject=f"preemptd.cluster.x{HOSTILE}.task", reason=f"unknown task {HOSTILE!r}", raw=HOSTILE.encode() + b"\xff", event_id=HOSTILE
    )
    text = render.dead_letter(dead)
    assert not any(ch in text for ch in "\x1b\x07\u202e\u2066\u200b\u2028\x9b\x7f")
    assert text.count("\\x1b]0;owned\\x07") == 4 and "\ufffd" in text, "subject, id, reason and payload; bytes not UTF-8 replaced"


@pytest.mark.parametrize(
    "data",
    [
        json.dumps({"subject": HOSTILE, "stream_seq": 3, "event_type": HOSTILE, "event_id": HOSTILE, "reason": HOSTILE, "received": 5}).encode(),
        json.dumps({"stream_seq": [3], "reason": HOSTILE}, ensure_ascii=False).encode(),  # not a notice: shown as such, escaped
        json.dumps({"received": 10**30, "reason": HOSTILE}, ensure_ascii=False).encode(),  # a time no clock can show
        HOSTILE.encode() + b"\xff",
    ],
)
def test_tail_rejected_shows_any_notice_escaped_and_survives_forged_ones(data: bytes) -> None:
    """Anyone who may publish may publish on preemptd.rejected.*: `tail --rejected` and
    `publish --wait` read whatever comes."""
    from preemptd.daemon.cli.client import _rejection

    text = _rejection(data)
    assert not any(ch in text for ch in "\x1b\x07\u202e\u2066\u200b\u2028\x9b\x7f")
    assert "owned" in text
