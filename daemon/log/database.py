"""A log's database (`Database`): reaching it (its URL, a file path or a SQLAlchemy URL, and how
it is shown; the engine's settings per database), opening it (its schema migrated or checked,
its log id), and its transactions: shielded, waiting out another process's lock until the
daemon stops, fenced by the writer's lease; SQLAlchemy's and the drivers' failures said in one
line a user can act on."""

from __future__ import annotations

import logging
import os
import shlex
import socket
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from preemptd import migrations

from ..errors import LogConflict, StoreError
from ..operations.logs import log
from .tables import META

__all__ = [
    "SAY_WAITING_EVERY",
    "Database",
    "Fence",
    "all_rows",
    "database_url",
    "engine_options",
    "failure",
    "first_value",
    "locked",
    "read_only_url",
    "scalar",
    "shown_url",
    "sqlite_exists",
    "tune_sqlite",
]


_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg"}


def database_url(target: str) -> str:
    """A SQLAlchemy URL for `target`, which may already be one or be a file path. A URL without
    an async driver gets the usual one (`sqlite://` -> `sqlite+aiosqlite://`)."""
    if "://" not in target:
        return f"sqlite+aiosqlite:///{Path(target).expanduser().resolve()}"
    scheme, rest = target.split("://", 1)
    return f"{_ASYNC_DRIVERS.get(scheme, scheme)}://{rest}"


def shown_url(target: str) -> str:
    """`target` as logs and errors show it: a URL's password replaced by `***`."""
    if "://" not in target:
        return target
    try:
        url = sa.make_url(target)
        if "password" in url.query:  # asyncpg takes one there too
            url = url.update_query_dict({"password": "***"})
        return url.render_as_string(hide_password=True)
    except (SQLAlchemyError, ValueError):
        return target.split("://", 1)[0] + "://…"  # not a URL SQLAlchemy reads: show no more than its kind


def url_without_secrets(target: str) -> str | None:
    """`target` as the state directory records it for the other commands: a file's absolute
    path, a URL without its password (they bring theirs: $PGPASSWORD, ~/.pgpass); None for a
    URL SQLAlchemy cannot read."""
    if "://" not in target:
        return str(Path(target).expanduser().resolve())
    try:
        url = sa.make_url(target)._replace(password=None)  # `set` takes None as "unchanged"
        query = {key: value for key, value in url.query.items() if key != "password"}
        return url.set(query=query).render_as_string(hide_password=False)
    except (SQLAlchemyError, ValueError):
        return None


#: Errors of the disk or the server under the log (SQLite's primary result codes, PostgreSQL's
#: SQLSTATEs), with what to look at.
_DISK_TROUBLE = {
    "SQLITE_IOERR": "the disk under the log failed, or its filesystem turned read-only (see `dmesg` and `mount`)",
    "SQLITE_READONLY": "the log cannot be written (a read-only filesystem, or the file's permissions)",
    "SQLITE_FULL": "the disk is full: free some space",
    "53100": "the database server's disk is full",
    "25006": "the database is read-only (a standby, after a failover?)",
}


def failure(exc: BaseException, target: str, doing: str) -> StoreError:
    """One line a user can act on, instead of SQLAlchemy's dump of the statement."""
    cause = getattr(exc, "orig", None) or exc
    said = " ".join(str(getattr(cause, "strerror", None) or cause).split())
    if getattr(cause, "sqlite_errorname", None) == "SQLITE_CORRUPT":
        file = shlex.quote(target.split(":///", 1)[-1])
        return StoreError(f"the log {file} is damaged ({said}): check it with `sqlite3 {file} 'pragma integrity_check'`")
    if _session_ended(cause, said):
        return StoreError(
            f"{doing} {target}: the database ended the session (terminated by an administrator or a standby, or the server restarted or failed over)"
        )
    trouble = _DISK_TROUBLE.get("_".join(str(getattr(cause, "sqlite_errorname", "")).split("_")[:2])) or _DISK_TROUBLE.get(
        getattr(cause, "sqlstate", None) or ""
    )
    if trouble is not None:
        return StoreError(f"{doing} {target}: {said}: {trouble}; what was not committed is read again from NATS at the next start")
    if getattr(cause, "sqlstate", None) == "3D000":  # invalid_catalog_name: the database does not exist
        database = urllib.parse.urlsplit(target).path.lstrip("/") or "postgres"
        return StoreError(
            f"{doing} {target}: {said}; create it first, for example `createdb {shlex.quote(database)}` or `psql -c 'CREATE DATABASE \"{database}\"'` "
            "on the server, and preemptd makes its tables"
        )
    return StoreError(f"{doing} {target}: {said}")


#: How often a wait on the log (a lock held elsewhere, a frozen disk) is said.
SAY_WAITING_EVERY = 5.0


def locked(exc: BaseException) -> bool:
    """SQLite's `database is locked`: another process holds the log's lock beyond the busy timeout."""
    cause = getattr(exc, "orig", None) or exc
    return getattr(cause, "sqlite_errorname", None) == "SQLITE_BUSY" or "database is locked" in str(cause)


def _session_ended(cause: BaseException, said: str) -> bool:
    """asyncpg's ways of saying that the server ended the connection under it (sqlstate 57P01:
    terminated by an administrator; `cannot switch to state 15` when it happens mid-query)."""
    return getattr(cause, "sqlstate", None) in ("57P01", "57P02", "57P03") or any(
        words in said for words in ("cannot switch to state", "connection is closed", "connection was closed in the middle of operation")
    )


def engine_options(url: str, *, writing: bool) -> dict[str, Any]:
    """PostgreSQL connections say whose they are (`pg_stat_activity`), and those of the commands
    that only read a log cannot write (SQLite files are opened read-only instead)."""
    if not url.startswith("postgresql"):
        return {}
    settings = {"application_name": f"preemptd pid {os.getpid()} on {socket.gethostname()}"[:63]}
    if not writing:
        settings["default_transaction_read_only"] = "on"
    return {"connect_args": {"server_settings": settings}}


def read_only_url(url: str) -> str:
    """The same SQLite file, opened read-only: reading a log never changes it."""
    path = url.split(":///", 1)[1] if ":///" in url else ":memory:"
    if path == ":memory:" or "?" in path:
        return url  # an in-memory log, or a URL that already says how to open it
    return f"sqlite+aiosqlite:///file:{urllib.parse.quote(path)}?mode=ro&uri=true"


def sqlite_exists(url: str) -> bool:
    path = url.split(":///", 1)[-1]
    return path == ":memory:" or Path(path).exists()


WAL_KEPT = 64 * 2**20  # bytes of write-ahead log kept on disk after a checkpoint


def tune_sqlite(engine: AsyncEngine, synchronous: str) -> None:
    @sa.event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA journal_size_limit={WAL_KEPT}")  # a WAL grown by a large transaction is cut back once checkpointed
        cursor.close()


async def scalar(conn: AsyncConnection, query) -> int:
    return (await conn.execute(query)).scalar_one()


async def first_value(conn: AsyncConnection, query) -> Any:
    """The first column of the first row, or None without rows."""
    return (await conn.execute(query)).scalar()


async def all_rows(conn: AsyncConnection, query) -> list[tuple]:
    return [tuple(row) for row in (await conn.execute(query)).all()]


#: How a writer's transaction is fenced (`WriterLease.fence`): `work` run in it only while the
#: lease is still the writer's.
Fence = Callable[..., Awaitable[Any]]


class Database:
    """One log database: its engine, its log id, and its transactions.

    - `run(work, *args)`: one transaction, shielded from cancellation (a cancelled one would
      leave SQLAlchemy closing its connection in a task of its own, which outlives the event
      loop and held up a stop). A SQLite log locked by another process is waited for, saying so
      every few seconds, not a failure: nothing is acknowledged until it is written; `stopping`
      set (the daemon stops) ends the wait. `busy` holds when each running transaction began,
      for a watchdog.
    - `write(work, *args)`: one writing transaction, fenced by the writer's lease when it holds
      one (`fence`): a writer that lost it (a standby ended its session) writes nothing more,
      even before it notices.
    """

    def __init__(self, engine: AsyncEngine, log_id: str, target: str, schema: str, stopping: anyio.Event | None = None) -> None:
        self.engine, self.log_id, self.target, self.schema = engine, log_id, target, schema
        self.stopping = stopping if stopping is not None else anyio.Event()
        self.fence: Fence | None = None  # a PostgreSQL log's writer: its lease's fence (see `WriterLease.fence`)
        self.busy: dict[object, float] = {}  # when each running transaction began (time.monotonic())

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @classmethod
    async def open(cls, target: str, *, synchronous: str = "FULL", create: bool = True, stopping: anyio.Event | None = None) -> Database:
        """Open the log at `target`, a file path or a SQLAlchemy URL: created and migrated if
        `create`, else opened read-only as it is (the commands that only read a log)."""
        url = database_url(target)
        target = shown_url(target)  # as errors name it
        if url.startswith("sqlite") and not create:
            if not sqlite_exists(url):
                raise StoreError(f"no preemptd log at {target}: run `preemptd run` or `preemptd simulate --db` first")
            url = read_only_url(url)
        try:
            engine = create_async_engine(url, **engine_options(url, writing=create))
        except ValueError as exc:  # a port that is not a number
            raise StoreError(f"cannot use the database URL {target}: {exc}") from None
        except (SQLAlchemyError, ImportError) as exc:
            raise StoreError(f"cannot use the database URL {target}: {exc} (preemptd needs an async driver, e.g. sqlite+aiosqlite:///FILE)") from None
        if url.startswith("sqlite") and create:
            tune_sqlite(engine, synchronous)
        try:
            with anyio.CancelScope(shield=True):  # as every transaction: see `run`
                async with engine.begin() as conn:
                    if create:
                        await conn.run_sync(_upgrade, target)
                        schema = migrations.HEAD
                    else:
                        found: str | None = await conn.run_sync(_check_schema, target, writable=False)
                        schema = found or migrations.HEAD
                    log_id = await _ensure_log_id(conn, create=create)
        except StoreError:
            await engine.dispose()
            raise
        except (SQLAlchemyError, OSError) as exc:  # OSError: a server that is not there
            await engine.dispose()
            raise failure(exc, target, "cannot open the log at") from None
        return cls(engine, log_id, target, schema, stopping)

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):  # closing runs on a stop signal too
            await self.engine.dispose()

    async def run(self, work, *args):
        """One transaction (see the class)."""
        said = 0.0
        while True:
            try:
                with anyio.CancelScope(shield=True):
                    token = object()
                    self.busy[token] = time.monotonic()
                    try:
                        async with self.engine.begin() as conn:
                            return await work(conn, *args)
                    finally:
                        del self.busy[token]
            except IntegrityError as exc:
                raise LogConflict(f"the log at {self.target} holds a row this daemon did not write ({str(exc.orig).splitlines()[0]})") from exc
            except (SQLAlchemyError, OSError) as exc:
                if not locked(exc):
                    raise failure(exc, self.target, "log database error at") from exc
            if self.stopping.is_set():  # the daemon's writes are shielded from its cancellation: the wait ends here
                raise StoreError(
                    f"stopping while another process holds the lock of the log at {self.target}: nothing more was written, and what was not is read "
                    "again at the next start"
                )
            if time.monotonic() - said >= SAY_WAITING_EVERY:
                said = time.monotonic()
                log("waiting for the log: another process holds its lock", logging.WARNING, db=self.target)
            await anyio.sleep(0.2)  # a stop signal ends the wait

    async def write(self, work, *args):
        """One writing transaction, fenced when the daemon holds a lease (see the class)."""
        if self.fence is None:
            return await self.run(work, *args)
        return await self.run(self.fence, work, *args)


def _upgrade(connection: sa.Connection, target: str) -> None:
    if _check_schema(connection, target, writable=True) != migrations.HEAD:
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(migrations.LOCATION))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def _check_schema(connection: sa.Connection, target: str, *, writable: bool) -> str | None:
    """The log's schema revision (None for an empty database). Refuses a database this version
    cannot use: another application's, a newer preemptd's, or (read-only) one that needs `db
    upgrade` first."""
    tables = sa.inspect(connection).get_table_names()
    current = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() if "alembic_version" in tables else None
    if current is None:
        foreign = [name for name in tables if name != "alembic_version"]
        if foreign or not writable:
            raise StoreError(f"{target} is not a preemptd log" + (f" (it has tables {', '.join(sorted(foreign)[:5])})" if foreign else ""))
        return None
    head = migrations.HEAD
    if current not in migrations.REVISIONS:
        raise StoreError(f"the log at {target} was written by a newer preemptd (schema {current}; this version knows up to {head}): upgrade preemptd")
    if current < migrations.READABLE and not writable:
        raise StoreError(f"the log at {target} has an older schema ({current}): run `preemptd db upgrade --db {target}`")
    return current


async def _ensure_log_id(conn: AsyncConnection, *, create: bool = True) -> str:
    """Each log gets a random name once; decision ids carry it, so two logs never collide."""
    existing = (await conn.execute(sa.select(META.c.value).where(META.c.key == "log_id"))).scalar()
    if existing or not create:
        return existing or "?"
    log_id = uuid.uuid4().hex[:8]
    await conn.execute(META.insert().values(key="log_id", value=log_id))
    return log_id
