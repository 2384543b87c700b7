"""How long the commands that only print take to start, against bare Python in the same run.

    .venv/bin/python bench/cli_start.py              # 7 interleaved rounds
    .venv/bin/python bench/cli_start.py --rounds 15

Each round runs `python -c pass` and `preemptd --help`, `--version` and `schema` once each, as
new processes, in that order; min and median of each over the rounds, and each command's
median less bare Python's (the aim: within 150 ms).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "preemptd --help": [sys.executable, "-m", "preemptd.daemon.entry", "--help"],
    "preemptd --version": [sys.executable, "-m", "preemptd.daemon.entry", "--version"],
    "preemptd schema": [sys.executable, "-m", "preemptd.daemon.entry", "schema"],
}


def seconds(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            times[name].append(seconds(command))
    bare = statistics.median(times["python -c pass"])
    for name, measured in times.items():
        median = statistics.median(measured)
        extra = "" if name.startswith("python") else f"  = bare Python + {(median - bare) * 1000:.0f} ms"
        print(f"{name:20} min {min(measured) * 1000:6.0f} ms  median {median * 1000:6.0f} ms{extra}")


if __name__ == "__main__":
    main()
