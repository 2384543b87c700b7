"""Structured logs: one line per event batch, cycle and decision summary, as logfmt (default)
or JSON, on stderr. Fields travel in `extra={"fields": {...}}`; `log()` is the shorthand."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["configure", "log"]

logger = logging.getLogger("preemptd")


def _logfmt_value(value: Any) -> str:
    """The value as logfmt: quoted, with every non-ASCII or control character escaped, when it
    holds anything but printable ASCII without spaces, quotes or equals signs (shims' names and
    reasons reach the logs: nothing in them may act on a terminal)."""
    text = str(value)
    if text == "" or not (text.isascii() and text.isprintable()) or any(c in text for c in ' ="\\'):
        return json.dumps(text)
    return text


def _stamp(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


class _LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = {"ts": _stamp(record), "level": record.levelname.lower(), "msg": record.getMessage(), **getattr(record, "fields", {})}
        line = " ".join(f"{key}={_logfmt_value(value)}" for key, value in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"ts": _stamp(record), "level": record.levelname.lower(), "msg": record.getMessage(), **getattr(record, "fields", {})}
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def _not_tls_eof_noise(record: logging.LogRecord) -> bool:
    """asyncio warns at every TLS connection nats-py closes that its protocol's answer to an end
    of stream has no effect under TLS: harmless, and it would follow every refusal's one line."""
    return not str(record.msg).startswith("returning true from eof_received()")


def configure(level: str = "info", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if fmt == "json" else _LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logger.setLevel(level.upper())
    asyncio_logger = logging.getLogger("asyncio")
    if _not_tls_eof_noise not in asyncio_logger.filters:
        asyncio_logger.addFilter(_not_tls_eof_noise)


def log(message: str, level: int = logging.INFO, **fields: Any) -> None:
    logger.log(level, message, extra={"fields": fields})
