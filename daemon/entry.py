"""The `preemptd` console script. Loading the CLI takes a moment (SQLAlchemy, NATS, the
engine): a stop signal in that moment, or in any other before a command handles signals itself
(as `run` does from its first step), ends the program quietly instead of killing it mid-way."""

from __future__ import annotations

import signal
import sys


class _Stopped(BaseException):
    """SIGTERM arrived while no command handled it."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped


def _is_stop(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_stop(inner) for inner in exc.exceptions)
    return isinstance(exc, (_Stopped, KeyboardInterrupt))


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    try:
        from .cli import main as cli

        return cli()
    except BaseException as exc:
        if not _is_stop(exc):
            raise
        return 130 if isinstance(exc, KeyboardInterrupt) else 0


if __name__ == "__main__":
    sys.exit(main())
