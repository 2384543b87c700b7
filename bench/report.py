"""`preemptd report` of a day's log: one million cluster events (and the ticks and decisions the
cycles made of them, as in bench/replay.py), against `preemptd state` of the same log (the same
read, decode and fold, without the timeline), in interleaved rounds.

    .venv/bin/python bench/report.py                     # 1,000,000 events, 3 rounds
    .venv/bin/python bench/report.py --events 200000

Prints the seconds of each (min and median), their ratio, and the page's size.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import anyio
from replay import command_seconds, log_arguments, make_log


def main() -> None:
    args = log_arguments(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        db, page = Path(tmp) / "log.db", Path(tmp) / "report.html"
        events = anyio.run(make_log, db, args.events)
        timings: dict[str, list[float]] = {"state": [], "report": []}
        for _ in range(args.rounds):
            timings["state"].append(command_seconds("state", "--db", str(db)))
            timings["report"].append(command_seconds("report", "--db", str(db), "-o", str(page), "--quiet"))
        state, report = (statistics.median(timings[name]) for name in ("state", "report"))
        print(f"{events:,} cluster events, {args.rounds} rounds; seconds as min / median")
        for name, seconds in timings.items():
            print(f"{name:<8} {min(seconds):6.1f} / {statistics.median(seconds):6.1f} s")
        print(f"report = {report / state:.2f}x state; the page: {page.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
