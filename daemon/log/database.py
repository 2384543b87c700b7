"""Reaching a log's database: its URL (a file path or a SQLAlchemy URL) and how it is shown,
the engine's settings per database, and SQLAlchemy's and the drivers' failures said in one line
a user can act on."""

from __future__ import annotations

import os
import shlex
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..errors import StoreError

__all__ = ["SAY_WAITING_EVERY", "database_url", "engine_options", "failure", "locked", "read_only_url", "scalar", "shown_url", "sqlite_exists", "tune_sqlite"]


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
