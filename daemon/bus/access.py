"""Reaching NATS: URLs as nats-py reads them, credentials and TLS, a reachability check that
names what is wrong, and the errors of nats-py said in one line."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import nats
import nats.errors
import nats.js.errors

from ..errors import BusError

__all__ = ["NATS_ERRORS", "NatsAccess", "check_credentials", "describe", "nats_address", "reachable", "redacted", "refusal", "servers"]

NATS_ERRORS = (nats.errors.Error, nats.js.errors.Error, asyncio.TimeoutError, OSError)


_INBOX_PREFIX = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
_DEFAULT_PORTS = {"nats": 4222, "tls": 4222, "ws": 80, "wss": 443}


def nats_address(url: str) -> tuple[str, int]:
    """The host and port `url` names, read as nats-py reads it (`host:port` means nats://);
    a `BusError` that says what is wrong with it."""
    parsed = urlsplit(url if "://" in url else f"nats://{url}")
    shown = redacted(url)
    if parsed.scheme not in _DEFAULT_PORTS:
        raise BusError(f"NATS URL {shown!r}: the scheme must be nats://, tls://, ws:// or wss://, not {parsed.scheme}://")
    bad_port = BusError(f"NATS URL {shown!r}: the port must be a number from 1 to 65535")
    try:
        port = parsed.port
    except ValueError:
        raise bad_port from None
    if not parsed.hostname:
        raise BusError(f"NATS URL {shown!r} names no host")
    if port == 0:
        raise bad_port
    return parsed.hostname, port or _DEFAULT_PORTS[parsed.scheme]


def servers(url: str) -> list[str]:
    """The servers of a NATS URL: one, or several separated by commas (a cluster)."""
    found = [server.strip() for server in url.split(",") if server.strip()]
    if not found:
        raise BusError("the NATS URL is empty")
    return found


def redacted(url: str) -> str:
    """`url` as logs and errors may show it: user, password and token replaced by `***`."""
    shown = []
    for server in servers(url):
        scheme, separator, rest = server.rpartition("://")
        shown.append(f"{scheme}{separator}***@{rest.rsplit('@', 1)[1]}" if "@" in rest else server)
    return ",".join(shown)


@dataclass(frozen=True)
class NatsAccess:
    """How to authenticate to NATS and check its certificate, besides what the URL holds
    (`nats://user:password@host`, `nats://token@host`, `tls://` for TLS)."""

    creds: str | None = None  # a JWT and nkey credentials file
    user: str | None = None
    password: str | None = None
    token: str | None = None
    tls_ca: str | None = None  # the CA that signed the server's certificate (default: the system's)
    tls_cert: str | None = None  # a client certificate, for servers that verify clients
    tls_key: str | None = None
    inbox_prefix: str | None = None  # where replies come (default `_INBOX`): a user's own, where permissions grant each its inbox

    def options(self, url: str) -> dict[str, Any]:
        """nats-py's connect options for this access; `BusError` for a file that cannot be used."""
        options: dict[str, Any] = {key: value for key, value in (("user", self.user), ("password", self.password), ("token", self.token)) if value}
        if self.inbox_prefix:
            if not _INBOX_PREFIX.fullmatch(self.inbox_prefix):
                raise BusError(
                    f"--nats-inbox-prefix {self.inbox_prefix!r}: a NATS subject of letters, digits, _ and -, with dots between its tokens (for example "
                    "_INBOX_alice)"
                )
            options["inbox_prefix"] = self.inbox_prefix
        if self.creds:
            check_credentials(self.creds)
            options["user_credentials"] = self.creds
        if self.tls_ca or self.tls_cert or any(server.startswith("tls://") for server in servers(url)):
            options["tls"] = self._tls_context()
        return options

    def _tls_context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cafile=_readable(self.tls_ca, "--nats-tls-ca") if self.tls_ca else None)
            if self.tls_cert:
                context.load_cert_chain(_readable(self.tls_cert, "--nats-tls-cert"), _readable(self.tls_key, "--nats-tls-key") if self.tls_key else None)
        except ssl.SSLError as exc:
            raise BusError(f"cannot use the TLS files given: {exc.reason or exc}") from None
        return context


_CREDS_PARTS = {b"-----BEGIN NATS USER JWT-----": "the user JWT", b"-----BEGIN USER NKEY SEED-----": "the nkey seed"}


def check_credentials(path: str) -> None:
    """`--nats-creds` names a credentials file: a user JWT and its nkey seed, as `nsc` writes
    them (nats-py met anything else with a TypeError deep in the handshake)."""
    _readable(path, "--nats-creds")
    with open(path, "rb") as file:
        head = file.read(64 * 1024)
    missing = [name for part, name in _CREDS_PARTS.items() if part not in head]
    if missing:
        raise BusError(f"--nats-creds {path}: not a NATS credentials file: it lacks {' and '.join(missing)} that `nsc generate creds` writes")


def _readable(path: str, option: str) -> str:
    try:
        with open(path, "rb"):
            return path
    except OSError as exc:
        raise BusError(f"{option} {path}: {exc.strerror}") from None


async def reachable(url: str, timeout: float) -> None:
    """Check that something listens at one of the servers of `url`, so that a wrong URL or a
    server that is down is reported at once, in its own words (nats-py would retry until its
    timeout)."""
    problems = []
    for server in servers(url):
        problem = await _unreachable(server, timeout)
        if problem is None:
            return
        problems.append(problem)
    raise BusError(f"cannot connect to NATS at {redacted(url)}: {'; '.join(problems)}")


async def _unreachable(server: str, timeout: float) -> str | None:
    """Why nothing answers at `server`, or None when something does."""
    host, port = nats_address(server)
    try:
        probe = await anyio.to_thread.run_sync(socket.create_connection, (host, port), timeout, abandon_on_cancel=True)
    except ConnectionRefusedError:
        return f"connection refused at {host}:{port} (is it running?)"
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout:g}s"
    except OSError as exc:  # an unknown host, an unreachable network
        return f"{exc.strerror or exc}"
    probe.close()
    return None


def describe(exc: BaseException) -> str:
    """The error's text, or its kind when it has none (a timeout)."""
    return str(exc).strip() or {"TimeoutError": "timed out"}.get(type(exc).__name__, type(exc).__name__)


def refusal(exc: BaseException) -> str | None:
    """What a server's refusal says, in a line: credentials it does not take, a certificate
    that does not verify; None for other errors (a server not there yet: retried)."""
    if isinstance(exc, nats.errors.AuthorizationError) or "authorization violation" in str(exc).lower():
        return "authorization violation (wrong or missing credentials: check --nats-creds, the user and password or token)"
    if isinstance(exc, ssl.SSLError):
        said = getattr(exc, "verify_message", None) or exc.reason or describe(exc)
        return f"TLS: {said} (check --nats-tls-ca, and that the URL says tls://)"
    if "tls" in str(exc).lower() and "required" in str(exc).lower():
        return f"{describe(exc)} (use a tls:// URL)"
    return None
