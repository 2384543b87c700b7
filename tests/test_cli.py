"""The offline commands as a user runs them: schema, simulate, replay (exact and what-if),
explain, state and db upgrade, on real SQLite files."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import ROOT, preemptd

GENERAL = str(ROOT / "examples" / "general.yaml")


@pytest.fixture(scope="module")
def general_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sim") / "general.db"
    result = preemptd("simulate", GENERAL, "--quiet", "--db", str(db), hash_seed=1)
    assert result.returncode == 0, result.stderr
    return db


@pytest.mark.parametrize("command", [["--help"], ["--version"], ["schema"], ["simulate", "--help"]])
def test_the_commands_that_only_print_load_no_database_nats_or_progress_bar(command: list[str]) -> None:
    """They start in a tenth of the time of `run` (bench/cli_start.py): nothing they do needs
    SQLAlchemy, Alembic, nats-py, anyio, tqdm or PyYAML, so they must not import them."""
    heavy = ["sqlalchemy", "alembic", "nats", "anyio", "tqdm", "yaml", "aiosqlite"]
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['preemptd', *{command!r}]\n"
        "try:\n    runpy.run_module('preemptd.daemon.entry', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print(sorted(name for name in {heavy!r} if name in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_schema_is_a_json_schema_naming_every_event_type() -> None:
    result = preemptd("schema")
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert _event_types(schema) >= {"task.submitted", "config.applied", "node.upserted"}
    decisions = json.loads(preemptd("schema", "decisions").stdout)
    assert "decision.preempted" in _event_types(decisions)


def _event_types(schema: dict) -> set[str]:
    return {schema["$defs"][ref["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["enum"][0] for ref in schema["anyOf"]}


@pytest.fixture(scope="session")
def ajv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ajv 8 from the npm registry, in a folder of the test run (skipped without node and npm)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("no node and npm on PATH: the schema's keywords are checked in tests/test_events.py")
    folder = tmp_path_factory.mktemp("ajv")
    installed = subprocess.run(
        ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(folder), "ajv@8"], capture_output=True, text=True, timeout=300
    )
    if installed.returncode != 0:
        pytest.skip(f"npm could not install ajv: {installed.stderr.strip()[-300:]}")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cluster", "decisions"])
def test_the_schema_compiles_under_ajvs_default_strict_mode(ajv: Path, kind: str, tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_text(preemptd("schema", kind).stdout)
    script = (
        "const Ajv2020 = require('ajv/dist/2020'); const warnings = [];"
        "const ajv = new Ajv2020({logger: {log() {}, warn(m) { warnings.push(m) }, error(m) { warnings.push(m) }}});"
        f"const validate = ajv.compile(require({json.dumps(str(tmp_path / 'schema.json'))}));"
        "const ok = validate({type: 'node.removed', id: 'a', ts: 1, node: 'n'}); const refused = validate({type: 'node.removed', id: 'a', ts: 1, node: "
        "'n', nodeName: 'n'});"
        "console.log(JSON.stringify({warnings, ok, refused}));"
    )
    done = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60, env={**os.environ, "NODE_PATH": str(ajv / "node_modules")})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["warnings"] == []
    if kind == "cluster":
        assert result["ok"] and not result["refused"], "an unknown field is refused by the schema too"


def test_simulate_prints_decisions_and_the_final_state() -> None:
    result = preemptd("simulate", GENERAL, "--state")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    decisions = [json.loads(line) for line in lines if line.startswith('{"type"')]
    preempted = [d for d in decisions if d["type"] == "decision.preempted"]
    assert len(preempted) == 3 and all(d["queue"] == "root.normal.queue-2" for d in preempted)
    state = json.loads("\n".join(lines[len(decisions) :]))
    assert state["queues"]["root.normal.queue-1"]["allocated"] == {"vcore": 7}
    assert state["tasks"][preempted[0]["victims"][0]["task"]]["status"] == "released"


def test_simulate_check_fails_when_the_expectation_is_wrong(tmp_path: Path) -> None:
    scenario = yaml.safe_load(Path(GENERAL).read_text())
    scenario["expect"]["queues"]["root.normal.queue-1"] = {"allocated": {"vcore": 8}}
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(scenario))
    result = preemptd("simulate", str(path), "--check", "--quiet")
    assert result.returncode == 1
    assert "root.normal.queue-1: allocated vcore is 7, expected 8" in result.stderr


def test_simulate_refuses_a_scenario_with_a_typo(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("name: x\nconfig: {}\nevents: []\nuntill: 5s\n")
    result = preemptd("simulate", str(path))
    assert result.returncode == 2 and "untill" in result.stderr


def test_replay_reproduces_every_decision(general_log: Path) -> None:
    result = preemptd("replay", "--db", str(general_log), "--quiet", hash_seed=2)
    assert result.returncode == 0, result.stderr
    assert "all 23 decisions reproduced" in result.stdout


@pytest.mark.parametrize("example", ["fence", "allow-preemption", "priority-queues"])
def test_a_log_written_by_one_process_replays_in_another(example: str, tmp_path: Path) -> None:
    """Through the SQLite file and the codec, with another string hashing: nothing in the
    decisions may depend on the process that made them."""
    db = tmp_path / f"{example}.db"
    assert preemptd("simulate", str(ROOT / "examples" / f"{example}.yaml"), "--quiet", "--db", str(db), hash_seed=11).returncode == 0
    result = preemptd("replay", "--db", str(db), "--quiet", hash_seed=12)
    assert result.returncode == 0 and "decisions reproduced" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("name: x\nconfg: {}\nevents: []\n", "typo.yaml: not a scenario: unknown field `confg` (did you mean `config`?)"),
        (
            "name: x\nconfig: {}\nevents: []\nshim: {grace_perod: 1s}\n",
            "unknown field `grace_perod` (did you mean `grace_period`?) - at `$.shim`",
        ),
        ("name: x\nconfig: {a: [1\n", 'typo.yaml: not YAML: while parsing a flow sequence\n  in "'),
    ],
)
def test_simulate_names_the_file_and_the_field_meant(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    result = preemptd("simulate", str(path))
    assert result.returncode == 2 and said in result.stderr and "<byte string>" not in result.stderr, result.stderr


def test_simulate_refuses_a_misspelt_field_inside_an_event(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(
        "name: x\nconfig: {}\nevents:\n  - {type: task.submitted, task: t, app: a, queue: root.default, resources: {vcore: 1}, requried_node: n1}\n"
    )
    result = preemptd("simulate", str(path))
    assert result.returncode == 2 and "task.submitted: unknown field `requried_node` (did you mean `required_node`?)" in result.stderr


@pytest.mark.parametrize(("until", "reproduced"), [(14, 0), (18, 4), (30, 10)])
def test_replay_stops_where_asked_even_among_a_cycles_decisions(general_log: Path, until: int, reproduced: int) -> None:
    """Position 14 is a tick whose cycle decides 10 allocations at 15-24: cut at 18, the four
    stored ones are reproduced and the six beyond the cut are not missing."""
    result = preemptd("replay", "--db", str(general_log), "--until", str(until), "--quiet")
    assert result.returncode == 0, result.stdout
    assert f"all {reproduced} decisions reproduced" in result.stdout


def test_replay_reports_the_first_divergence_of_a_tampered_log(general_log: Path, tmp_path: Path) -> None:
    tampered = tmp_path / "tampered.db"
    tampered.write_bytes(general_log.read_bytes())
    with sqlite3.connect(tampered) as db:
        seq, payload = db.execute("select seq, payload from log where type='decision.preempted' order by seq limit 1").fetchone()
        db.execute("update log set payload=? where seq=?", (payload.replace(b'"node-1"', b'"node-9"', 1), seq))
    result = preemptd("replay", "--db", str(tampered), "--quiet")
    assert result.returncode == 1
    assert f"DIVERGED at log seq {seq}" in result.stdout
    assert "node: stored 'node-9', recomputed 'node-1'" in result.stdout


def test_replay_under_another_configuration_lists_the_decisions_that_differ(general_log: Path, tmp_path: Path) -> None:
    config = yaml.safe_load(Path(GENERAL).read_text())["config"]
    config["partitions"][0]["queues"][0]["queues"][0]["queues"][1]["resources"]["guaranteed"]["vcore"] = 2
    path = tmp_path / "queues.yaml"
    path.write_text(yaml.safe_dump(config))
    result = preemptd("replay", "--db", str(general_log), "--config", str(path), "--quiet")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sum("stored only" in line and " preempted " in line for line in lines) == 3, "queue-2 at 2 guaranteed preempts nothing"
    assert not any("new config" in line and " preempted " in line for line in lines)
    assert any("new config" in line and "law 4: root.normal.queue-2 is not under its guarantee" in line for line in lines)


def test_explain_shows_victims_and_laws(general_log: Path) -> None:
    with sqlite3.connect(general_log) as db:
        (decision_id,) = db.execute("select event_id from log where type='decision.preempted' order by seq limit 1").fetchone()
    result = preemptd("explain", decision_id, "--db", str(general_log))
    assert result.returncode == 0, result.stderr
    assert "victims:" in result.stdout and "law 4: root.normal.queue-2 is under its guarantee" in result.stdout
    assert "laws 5, 2" in result.stdout
    missing = preemptd("explain", "nope", "--db", str(general_log))
    assert missing.returncode == 2 and "no decision with id 'nope'" in missing.stderr


def test_state_shows_the_queue_tree_at_any_position(general_log: Path) -> None:
    end = preemptd("state", "--db", str(general_log))
    assert end.returncode == 0, end.stderr
    queue_1 = next(line for line in end.stdout.splitlines() if line.strip().startswith("queue-1"))
    assert queue_1.split()[1:3] == ["vcore", "7"]
    early = json.loads(preemptd("state", "--db", str(general_log), "--at", "25", "--json").stdout)
    assert early["queues"]["root.normal.queue-1"]["allocated"] == {"vcore": 10}


def test_db_upgrade_creates_and_reports_a_log(tmp_path: Path) -> None:
    result = preemptd("db", "upgrade", "--db", str(tmp_path / "new.db"))
    assert result.returncode == 0 and "schema up to date" in result.stdout


def test_state_accepts_a_plain_sqlite_url(general_log: Path) -> None:
    result = preemptd("state", "--db", f"sqlite:///{general_log}")
    assert result.returncode == 0, result.stderr
    assert "at log seq 104" in result.stdout and "queue-2" in result.stdout


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("mysql://localhost/none", "needs an async driver"),
        ("bogus://x", "cannot use the database URL bogus://x"),
        ("postgresql://me:hunter2@127.0.0.1:1/none", "cannot open the log at postgresql://me:***@127.0.0.1:1/none: Connect call failed"),
        ("postgresql://me:hunter2@127.0.0.1:x/none", "cannot use the database URL postgresql://…: invalid literal for int()"),
        ("postgresql://me@127.0.0.1:1/none?password=hunter2", "cannot open the log at postgresql://me@127.0.0.1:1/none?password=%2A%2A%2A"),
    ],
)
def test_a_database_url_preemptd_cannot_use_is_one_line(url: str, words: str) -> None:
    result = preemptd("state", "--db", url)
    assert result.returncode == 2
    assert words in result.stderr and "Traceback" not in result.stderr and "hunter2" not in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ('{"type": "node.upserted"}\n{"type": bad}\n', "line 2 is not JSON: Expecting value (column 10)"),
        ("name: x\nconfig: {}\nevents: []\n", "is a scenario file, not a list of events: run it with `preemptd simulate"),
        ('{"type": "node.upserted", "partition": "two words"}\n', "event 1 (id "),
        ('{"type": "node.upserted", "partition": "a.b"}\n', "partition 'a.b' is not 1-64 letters, digits, _ or -"),
        ("- {type: node.upserted, node: [n1\n", "events.jsonl is not YAML: while parsing a flow sequence in "),
        ("a: &a [*a]\n", "events.jsonl holds itself (an alias to what contains it)"),
    ],
)
def test_publish_refuses_what_it_cannot_send_before_connecting(tmp_path: Path, content: str | None, message: str) -> None:
    events = tmp_path / "events.jsonl"
    if content is not None:
        events.write_text(content)
    result = preemptd("publish", str(events), "--nats-url", "nats://127.0.0.1:1")
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr and "<unicode string>" not in result.stderr


@pytest.mark.parametrize(
    "argv",
    [["run", "--batch", "0"], ["run", "--nats-port", "70000"], ["state", "--at", "-5"], ["replay", "--until", "-3"], ["dead-letters", "--limit", "0"]],
)
def test_numbers_out_of_range_are_refused_up_front(argv: list[str]) -> None:
    result = preemptd(*argv)
    assert result.returncode == 2
    assert "error: argument" in result.stderr


def test_output_cut_short_by_the_reader_ends_quietly() -> None:
    """`preemptd simulate ... | head -1`: the pipe closes early (the output, about 700 kB, is
    far beyond a pipe's buffer), which is not an error."""
    command = f"{sys.executable} -m preemptd.daemon.cli simulate tests/scenarios/blocked-paced.yaml | head -1"
    result = subprocess.run(command, shell=True, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.stdout.startswith('{"type":"decision.blocked"') and "Traceback" not in result.stderr


def test_a_file_that_is_not_a_database_is_named_as_such(tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("not a database\n" * 100)
    result = preemptd("state", "--db", str(text))
    assert result.returncode == 2
    assert result.stderr.strip() == f"preemptd: cannot open the log at {text}: file is not a database"


@pytest.mark.parametrize(
    ("example", "queue", "said", "row"),
    [
        (
            "kueue/reclaim-within-cohort",
            "svc-b",
            {
                "pending": {},
                "cohort": "prod",
                "weight": 1.0,
                "nominal": {"default-flavor": {"cpu": 4}},
                "borrowing_limit": None,
                "admitted": {"default-flavor": {"cpu": 8}},
                "borrowed": {"default-flavor": {"cpu": 4}},
                "lent": None,
                "admitted_workloads": 2,
            },
            r"^  svc-b\s+cpu 8\s+0\s+0\s+prod\s+1\.0\s+default-flavor: cpu 4\s+-\s+-\s+default-flavor: cpu 8\s+default-flavor: cpu 4\s+-\s+2\s+2 run / 0 wait$",
        ),
        (
            "volcano/hierarchical-capacity",
            "eng",
            {"weight": 1, "capability": {"cpu": 8}, "guarantee": None, "deserved": {"cpu": 6}, "share": 0.8333},
            r"^  eng\s+cpu 5\s+0\s+0\s+1\s+cpu 8\s+-\s+cpu 6\s+0\.83$",
        ),
        (
            "general",
            "root.normal.queue-1",
            {"guaranteed": {"vcore": 5}, "max": {"vcore": 10}},
            r"^    queue-1\s+vcore 7\s+0\s+0\s+vcore 5\s+vcore 10\s+7 run / 0 wait$",
        ),
    ],
)
def test_state_shows_each_queue_in_its_models_terms_and_the_json_says_the_same(example: str, queue: str, said: dict, row: str, tmp_path: Path) -> None:
    """Kueue's cohort, quotas per flavor and what admitted workloads hold (quota reserved, pods
    running or not); Volcano's weight, capability, deserved and share; YuniKorn's guarantee
    and max: a column each in the table, a key each in `--json`."""
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(ROOT / "examples" / f"{example}.yaml"), "--quiet", "--db", str(db)).returncode == 0
    state = preemptd("state", "--db", str(db))
    assert re.search(row, state.stdout, re.M), state.stdout
    shown = json.loads(preemptd("state", "--db", str(db), "--json").stdout)["queues"][queue]
    assert {key: shown[key] for key in said} == said
    header = next(line for line in state.stdout.splitlines() if line.startswith("QUEUE"))
    columns = [key for key in shown if key.upper().replace("_", " ") in header and key not in ("allocated", "pending", "preempting")]
    assert [key.upper().replace("_", " ") for key in columns] == re.split(r"\s{2,}", header)[4:-1], "every column of the table is a key of the JSON"


def test_state_lists_volcano_jobs_with_their_gangs(tmp_path: Path) -> None:
    """Below the queues, each job: its gang (min_available), the tasks running and whether that
    makes it ready, and those waiting; the same in --json."""
    db = tmp_path / "log.db"
    assert preemptd("simulate", str(ROOT / "examples" / "volcano" / "reclaimable-false.yaml"), "--quiet", "--db", str(db)).returncode == 0
    text = preemptd("state", "--db", str(db)).stdout
    assert re.search(r"^JOB\s+QUEUE\s+PRIORITY\s+MIN AVAILABLE\s+RUNNING\s+READY\s+PIPELINED\s+WAITING$", text, re.M), text
    assert re.search(r"^sim\s+science\s+0\s+2\s+2\s+yes\s+0\s+2$", text, re.M), text
    jobs = json.loads(preemptd("state", "--db", str(db), "--json").stdout)["jobs"]
    assert {"job": "sim", "queue": "science", "priority": 0, "min_available": 2, "running": 2, "ready": "yes", "pipelined": 0, "waiting": 2} in jobs


def test_publish_reads_a_large_yaml_file_of_events(tmp_path: Path) -> None:
    """The bound on a YAML document's values (aliases counted) is a configuration's; a file of
    events may be far larger."""
    events = tmp_path / "many.yaml"
    events.write_text("".join(f"- {{type: node.upserted, node: n{i}, capacity: {{vcore: 4, memory: 8Gi}}}}\n" for i in range(15_000)))
    result = preemptd("publish", str(events), "--nats-url", "nats://127.0.0.1:1")
    assert result.returncode == 2 and "cannot connect to NATS" in result.stderr, result.stderr
