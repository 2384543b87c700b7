"""The writer's lease of a PostgreSQL log: one daemon writes, a standby waits, and a writer that
stops renewing it (hung, frozen) has its sessions ended after the expiry. Every write of a
writer with a lease is fenced by it (`fenced`), a write already past its check included: a new
writer waits for no write of the old one before it reads the log (`_fence_off`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from ..errors import StoreError
from ..operations.logs import log
from .database import database_url, engine_options, failure, scalar, shown_url

__all__ = ["LEASE_SECONDS", "WriterLease"]


#: A writer renews its lease every second (its lease connection checks the lock, which PostgreSQL
#: records as the connection's last query); a standby ends the session of a writer silent for
#: longer than this, so that a hung or frozen writer holds the log up for this long at most.
LEASE_SECONDS = 15.0


class WriterLease:
    """The right to write a PostgreSQL log, for a daemon and a standby on the same log: a
    session advisory lock, taken on a connection of its own and held while the daemon runs.
    PostgreSQL lets go of it the moment that connection ends, a writer killed with SIGKILL
    included, so a standby polling for it takes over within its poll. A writer that loses it
    must stop: `check` says so. (A SQLite log is one machine's: a lock file does, see `lock`.)"""

    _KEY = int.from_bytes(b"preemptd", "big") >> 1  # one lease per database: a log is a database
    _FENCE = _KEY - 1  # every write holds it shared for its transaction; a new writer takes it alone once

    def __init__(self, engine: AsyncEngine, connection: AsyncConnection, target: str, pid: int) -> None:
        self._engine, self._connection, self._target = engine, connection, target
        self.pid = pid  # the PostgreSQL backend of the connection that holds it

    async def fence(self, conn: AsyncConnection, work, *args):
        """`Database.fence`: `work` within this lease's fence (`_fenced`)."""
        return await _fenced(conn, work, self.pid, *args)

    @classmethod
    async def wait(cls, target: str, waiting: Callable[[str], None], poll: float = 0.5, expiry: float = LEASE_SECONDS) -> WriterLease:
        """Take the lease, waiting while another daemon holds it (`waiting` is told who, once);
        a holder silent for longer than `expiry` seconds has its session ended."""
        url, shown = database_url(target), shown_url(target)
        try:
            engine = create_async_engine(url, poolclass=NullPool, **engine_options(url, writing=True))
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise StoreError(f"cannot use the database URL {shown}: {exc}") from None
        try:
            with anyio.CancelScope(shield=True):
                connection = await (await engine.connect()).execution_options(isolation_level="AUTOCOMMIT")
            told = False
            while not await scalar(connection, sa.select(sa.func.pg_try_advisory_lock(cls._KEY))):
                holder = await _lease_holder(connection, cls._KEY)
                if holder is not None and holder.silent > expiry:
                    await _end_sessions(connection, holder, shown, expiry)
                    await anyio.sleep(poll)  # its backends take a moment to go
                    continue
                if not told:
                    waiting(holder.name if holder is not None else "another daemon")
                    told = True
                await anyio.sleep(poll)
            await _fence_off(connection, cls._FENCE, shown, poll)
        except (SQLAlchemyError, OSError) as exc:
            with anyio.CancelScope(shield=True):
                await engine.dispose()
            raise failure(exc, shown, "cannot take the writer's lease on the log at") from None
        except BaseException:
            with anyio.CancelScope(shield=True):
                await engine.dispose()
            raise
        return cls(engine, connection, shown, await scalar(connection, sa.select(sa.func.pg_backend_pid())))

    async def check(self) -> None:
        """`StoreError` unless the lease is still held (its connection still open)."""
        try:
            with anyio.CancelScope(shield=True), anyio.fail_after(10):
                held = await scalar(
                    self._connection, sa.text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted")
                )
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            raise StoreError(f"lost the writer's lease on the log at {self._target} ({failure(exc, self._target, 'its connection failed at')})") from None
        if not held:
            raise StoreError(f"lost the writer's lease on the log at {self._target}")

    async def release(self) -> None:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(SQLAlchemyError, OSError):  # a connection that ended already
                await self._connection.close()  # its end releases the lock
            await self._engine.dispose()


#: The advisory locks of key :high, :low on this database (a server holds many logs: each its database).
_OURS = (
    "l.locktype = 'advisory' AND l.granted AND l.classid = :high AND l.objid = :low AND l.objsubid = 1 "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
_HOLDS_LEASE = sa.text(f"SELECT count(*) FROM pg_locks l WHERE {_OURS} AND l.pid = :pid")


def _halves(key: int) -> dict[str, int]:
    return {"high": key >> 32, "low": key & 0xFFFFFFFF}


async def _fenced(conn: AsyncConnection, work, pid: int, *args):
    """`work`, in a transaction that holds the fence shared, then checks that the lease's
    connection (backend `pid`) still holds the lease. The fence makes the check hold until the
    commit: a new writer takes the fence alone before it reads the log, so a write that passed
    its check and then waited (on a lock, a slow disk) either commits before the new writer
    reads, or is ended by it."""
    await conn.execute(sa.select(sa.func.pg_advisory_xact_lock_shared(WriterLease._FENCE)))
    if not await scalar(conn, _HOLDS_LEASE.bindparams(**_halves(WriterLease._KEY), pid=pid)):
        raise StoreError("the writer's lease on the log is lost (its connection ended): this daemon writes no more")
    return await work(conn, *args)


async def _fence_off(connection: AsyncConnection, fence: int, shown: str, poll: float) -> None:
    """Once the lease is ours: take the fence alone for a moment, so that no write of the
    previous writer is still open when this daemon reads the log. Such a write (past its check,
    waiting) is ended, not waited for: its writer lost the lease, and what it did not commit
    is read again from NATS."""
    while not await scalar(connection, sa.select(sa.func.pg_try_advisory_lock(fence))):
        query = sa.text(f"SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE {_OURS} AND l.pid <> pg_backend_pid()")
        ended = [row[0] for row in (await connection.execute(query, _halves(fence))).all()]
        if ended:
            log("a write of the previous writer was still open: ended it before taking over", logging.WARNING, db=shown, writes=len(ended))
        if ended and not any(ended):
            raise StoreError(f"a write of the previous writer of the log at {shown} is still open and could not be ended: grant this user pg_signal_backend")
        await anyio.sleep(poll / 10)
    await connection.execute(sa.select(sa.func.pg_advisory_unlock(fence)))


@dataclass(frozen=True)
class _Holder:
    name: str  # the `application_name` of its connection: preemptd's pid and host
    pid: int  # its PostgreSQL backend
    silent: float  # seconds since its connection's last query


async def _lease_holder(connection: AsyncConnection, key: int) -> _Holder | None:
    """Who holds the lease, and how long its connection has been silent."""
    query = sa.text(
        "SELECT a.application_name, l.pid, extract(epoch FROM now() - greatest(a.query_start, a.backend_start)) "
        f"FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE {_OURS}"
    )
    row = (await connection.execute(query, _halves(key))).first()
    return None if row is None else _Holder(row[0] or "another daemon", row[1], float(row[2] or 0))


async def _end_sessions(connection: AsyncConnection, holder: _Holder, shown: str, expiry: float) -> None:
    """End every session of a writer that stopped renewing its lease (all its connections say
    its name): the lock goes with the lease's, and a write it began before it froze cannot
    commit after the standby takes over."""
    log(
        "the writer's lease expired: ending its sessions",
        logging.WARNING,
        holder=holder.name,
        silent_seconds=round(holder.silent, 1),
        expiry_seconds=expiry,
        db=shown,
    )
    query = sa.text(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :name AND datname = current_database() AND pid <> pg_backend_pid()"
    )
    ended = [row[0] for row in (await connection.execute(query, {"name": holder.name})).all()]
    if ended and not any(ended):  # none could be ended: the right is missing (a backend already gone is found again next time)
        raise StoreError(
            f"the writer's lease on the log at {shown} expired ({holder.name}, silent {holder.silent:.0f} s), but its sessions could not be ended: "
            "grant this user pg_signal_backend"
        )
