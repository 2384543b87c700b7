"""Shared fixtures: a real nats-server from the bundled binary on a free loopback port, real
SQLite files in temporary directories, and the daemon as a subprocess; and the state a list of
events (as a shim would publish them) folds into."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from preemptd.daemon.bus.embedded import EmbeddedNats
from preemptd.events import decode_cluster_event
from preemptd.projections import ClusterState, LogRecord, PartitionState
from preemptd.scheduling import apply

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # nats-py and SQLAlchemy's async layer need asyncio


# -- PostgreSQL: the log tests and the end-to-end daemon test run on it too -----------------

POSTGRES_URL = os.environ.get("PREEMPTD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
POSTGRES_REQUIRED = os.environ.get("PREEMPTD_TEST_POSTGRES") == "required"  # .ci/run sets it


def postgres(url: str, sql: str) -> list[tuple]:
    """Run `sql` on the PostgreSQL database at `url`, outside any test's event loop: its rows."""
    import asyncpg

    async def run() -> list[tuple]:
        connection = await asyncpg.connect(url, timeout=5)
        try:
            return [tuple(record) for record in await connection.fetch(sql)]
        finally:
            await connection.close()

    return asyncio.run(run())


@pytest.fixture
def postgres_log() -> Iterator[str]:
    """The URL of a new, empty database on the PostgreSQL at $PREEMPTD_TEST_POSTGRES_URL (by
    default the `test` database's server on 127.0.0.1:5432), dropped afterwards. Skipped when no
    server answers, unless $PREEMPTD_TEST_POSTGRES is `required` (as in CI): then it fails."""
    name = f"preemptd_{uuid.uuid4().hex[:12]}"
    try:
        postgres(POSTGRES_URL, f'CREATE DATABASE "{name}"')
    except (OSError, asyncio.TimeoutError, ImportError) as exc:
        why = f"no PostgreSQL at {POSTGRES_URL} ({type(exc).__name__}: {exc}); set PREEMPTD_TEST_POSTGRES_URL to use another"
        if POSTGRES_REQUIRED:
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        postgres(POSTGRES_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def log_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's log goes: a new SQLite file, or a new PostgreSQL database."""
    return str(tmp_path / "log.db") if request.param == "sqlite" else request.getfixturevalue("postgres_log")


@pytest.fixture
def nats_server(tmp_path: Path):
    """A fresh nats-server with JetStream, its data under the test's temporary directory."""
    with EmbeddedNats(tmp_path / "nats") as server:
        yield server


class DaemonProcess:
    """`preemptd run` in a subprocess; its stderr (the structured log) goes to a file."""

    def __init__(self, state_dir: Path, *args: str) -> None:
        self.state_dir = state_dir
        self.args = args
        self.log = state_dir.parent / f"{state_dir.name}-daemon.log"
        self.process: subprocess.Popen | None = None
        self.url: str | None = None

    def start(self, timeout: float = 30.0) -> DaemonProcess:
        return self.launch().listening(timeout)

    def launch(self) -> DaemonProcess:
        """Start the process, without waiting for it to listen (a standby waits for its lease)."""
        command = [sys.executable, "-m", "preemptd.daemon.cli", "run", "--state-dir", str(self.state_dir), *self.args]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return self

    def listening(self, timeout: float = 30.0) -> DaemonProcess:
        """Wait for the line that says the daemon listens, and keep its NATS URL."""
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline().decode()
        if "listening on" not in line or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"daemon did not start: {line!r}\n{self.log.read_text()[-3000:]}")
        self.url = line.split("listening on ", 1)[1].split()[0]
        return self

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self._close()

    def _close(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()

    def stop(self, timeout: float = 30.0) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close()
        return self.process.returncode

    def log_text(self) -> str:
        return self.log.read_text()

    # -- a shim's view: publish events, read decisions ---------------------------------------

    def publish(self, text: str) -> None:
        """Publish the events of `text` (a YAML list) with `preemptd publish`."""
        events = self.state_dir.parent / f"{self.state_dir.name}-events.yaml"
        events.write_text(text)
        published = preemptd("publish", str(events), "--state-dir", str(self.state_dir))
        assert published.returncode == 0, published.stderr

    def decisions(self, count: int) -> list[dict]:
        """The first `count` decisions on the stream (waiting up to 30 s for them)."""
        tail = preemptd("tail", "--json", "--from-start", "--count", str(count), "--timeout", "30", "--state-dir", str(self.state_dir))
        assert tail.returncode == 0, tail.stderr
        return [json.loads(line) for line in tail.stdout.splitlines()]

    def decisions_until(self, enough: Callable[[list[dict]], bool], timeout: float = 30) -> list[dict]:
        """The decisions so far, once `enough` says they are: for counts that depend on how
        cycles split a batch of events (a task may say why it waits before its job is whole)."""
        deadline = time.monotonic() + timeout
        while True:
            tail = preemptd("tail", "--json", "--from-start", "--timeout", "2", "--state-dir", str(self.state_dir))
            found = [json.loads(line) for line in tail.stdout.splitlines()]
            if enough(found) or time.monotonic() > deadline:
                return found


@pytest.fixture
def daemon_factory(tmp_path: Path):
    started: list[DaemonProcess] = []

    def make(*args: str, state_dir: Path | None = None) -> DaemonProcess:
        daemon = DaemonProcess(state_dir or tmp_path / "state", *args)
        started.append(daemon)
        return daemon

    yield make
    for daemon in started:
        daemon.stop()


def preemptd(
    *args: str, input: str | None = None, timeout: float = 120, hash_seed: int | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run a `preemptd` command as a user would, and capture what it prints. `hash_seed` sets
    PYTHONHASHSEED, so that a replay can run with another string hashing than the run; `env`
    adds to the environment."""
    env = {**os.environ, **({"PYTHONHASHSEED": str(hash_seed)} if hash_seed is not None else {}), **(env or {})}
    command = [sys.executable, "-m", "preemptd.daemon.cli", *args]
    return subprocess.run(command, input=input, capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)


def partition_after(*events: dict) -> PartitionState:
    """The default partition once `events` (dicts as published, without id and ts) are folded."""
    state = ClusterState(log_id="t")
    for i, event in enumerate(events, 1):
        decoded = decode_cluster_event(msgspec.json.encode({"id": f"e{i}", "ts": 0, **event}))
        apply(state, LogRecord(state.seq + 1, 0, decoded))
    return state.partitions["default"]
