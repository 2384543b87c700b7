"""What the console script records before the CLI is loaded, for the commands to read once they
run: SIGTERMs received meanwhile (see `entry`), and the version, said without loading anything."""

from __future__ import annotations

__all__ = ["early_stops", "version"]

#: SIGTERMs received before the command handles them.
early_stops: list[int] = []


def version() -> str:
    from importlib.metadata import version

    return f"preemptd {version('preemptd')}"
