"""The `preemptd` console script. Loading the CLI takes a moment (SQLAlchemy, NATS, the
engine); a Ctrl-C in that moment ends the program quietly, as it does later."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from .cli import main as cli
    except KeyboardInterrupt:
        return 130
    return cli()


if __name__ == "__main__":
    sys.exit(main())
