"""The `preemptd` console script. Loading the CLI takes a moment (SQLAlchemy, NATS, the
engine). A SIGTERM from the first moment is recorded, never raised into whatever code runs
then (a library may swallow it, or be left half-done): once loaded, a command that has not
started ends at once, and `run` stops as soon as it handles signals itself, before it starts
anything. So no moment of a start is unguarded."""

from __future__ import annotations

import signal
import sys

from .early import early_stops, version


def _record(signum: int, frame: object) -> None:
    early_stops.append(signum)


def main() -> int:
    if sys.argv[1:] == ["--version"]:  # at once, without loading the CLI
        print(version())
        return 0
    signal.signal(signal.SIGTERM, _record)
    try:
        from .cli import main as cli
    except KeyboardInterrupt:
        return 130
    return cli()


if __name__ == "__main__":
    sys.exit(main())
