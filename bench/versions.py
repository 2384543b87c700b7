"""Two versions of preemptd on the same log: what a change costs where every event passes
(reading, decoding and folding the log; each cycle run again), measured in one run.

    .venv/bin/python bench/versions.py 9361733                    # that commit against the checkout
    .venv/bin/python bench/versions.py 9361733 --events 200000 --rounds 5

The log is `bench/replay.py`'s (1,000 nodes, tasks submitted, placed, bound and released, a
cycle after every 1,000 events), made by the other version (an older version refuses a log whose
schema is newer than it knows; the checkout migrates a copy of the older one). The other version
is checked out in a temporary git worktree and run from it (`PYTHONPATH` names it as the
`preemptd` package); the rounds interleave the two versions, so that the machine's drift
touches both alike. Reported: per command, the
median seconds of each version and their ratio (the checkout's over the other's).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {"state": ("state", "--db"), "replay": ("replay", "--quiet", "--db")}


def seconds(package_parent: Path, *args: str) -> float:
    """One command of the version whose package `package_parent/preemptd` is."""
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "preemptd.daemon.entry", *args], cwd=package_parent, env=env, capture_output=True, check=True)
    return time.perf_counter() - started


def make_log_with(package_parent: Path, tree: Path, db: Path, events: int) -> int:
    """The log of `bench/replay.py` as the version at `tree` (its package in `package_parent`)
    writes it: how many records it holds."""
    code = (
        f"import sys, anyio; sys.path.insert(0, {str(tree / 'bench')!r}); from pathlib import Path; from replay import make_log; "
        f"print(anyio.run(make_log, Path({str(db)!r}), {events}))"
    )
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    done = subprocess.run([sys.executable, "-c", code], cwd=package_parent, env=env, capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", help="the commit (or branch) to compare the checkout with")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        versions = {"checkout": work / "checkout", args.other: work / "other"}
        versions["checkout"].mkdir()
        (versions["checkout"] / "preemptd").symlink_to(ROOT)
        subprocess.run(["git", "worktree", "add", "--detach", str(work / "tree"), args.other], cwd=ROOT, capture_output=True, check=True)
        try:
            versions[args.other].mkdir()
            (versions[args.other] / "preemptd").symlink_to(work / "tree")
            made = make_log_with(versions[args.other], work / "tree", work / "log.db", args.events)
            logs = {name: work / f"log-{index}.db" for index, name in enumerate(versions)}
            for log in logs.values():
                shutil.copyfile(work / "log.db", log)
            for name, parent in versions.items():  # a first read: the checkout migrates its copy, outside the rounds
                seconds(parent, "state", "--db", str(logs[name]))
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.rounds):
                for command, words in COMMANDS.items():
                    for name, parent in versions.items():
                        times.setdefault((command, name), []).append(seconds(parent, *words, str(logs[name])))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(work / "tree")], cwd=ROOT, capture_output=True, check=False)
    print(f"{made:,} log records, {args.rounds} interleaved rounds; medians (seconds):")
    for command in COMMANDS:
        mine, theirs = statistics.median(times[(command, "checkout")]), statistics.median(times[(command, args.other)])
        print(f"  {command:<7} checkout {mine:6.2f}   {args.other} {theirs:6.2f}   ratio {mine / theirs:.3f}")


if __name__ == "__main__":
    main()
