"""One daemon per log: a second daemon writing the same log would reuse its positions and steal
its consumer. The lock is a file beside a SQLite log (`preemptd.db.lock`), or in the state
directory for an in-memory one; it holds the pid of the daemon that has it. (A PostgreSQL log
has a writer's lease instead, for which a second daemon waits: `store.WriterLease`.)"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import UsageError

__all__ = ["single_writer"]


@contextmanager
def single_writer(db_url: str, state_dir: Path) -> Iterator[None]:
    """Hold the lock of the log at `db_url` (a SQLAlchemy URL), or say who holds it."""
    lock_path = _lock_path(db_url, state_dir)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            raise UsageError(f"another preemptd (pid {holder}) is writing this log; its lock is {lock_path}") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield


def _lock_path(db_url: str, state_dir: Path) -> Path:
    if db_url.startswith("sqlite") and ":memory:" not in db_url:
        database = Path(db_url.split(":///", 1)[1])
        return database.with_name(database.name + ".lock")
    return state_dir / "daemon.lock"
