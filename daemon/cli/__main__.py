"""`python -m preemptd.daemon.cli`: the console script without its early signal handling."""

import sys

from .main import main

if __name__ == "__main__":
    sys.exit(main())
