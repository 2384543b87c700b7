"""`preemptd report`: one self-contained HTML page of a log's timeline (the data from
`scheduling.Timeline`, drawn in the browser with uPlot, which the page carries inline: it opens
from a file or an attachment, with no network)."""

from __future__ import annotations

import base64
import datetime
import gzip
import html
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from tqdm import tqdm

from preemptd.events import to_builtins
from preemptd.scheduling import ReplayReport, Timeline, Window, compare, counted

from ..errors import UsageError
from ..log.history import History
from .render import tables_text

__all__ = ["build", "page", "page_data", "what_if", "window", "with_comparison", "write_report"]

_ASSETS = resources.files("preemptd.daemon.cli") / "report_page"
_MAX_DEAD_LETTERS = 10_000  # marked on the timeline; `preemptd dead-letters` lists them all
_TABLE_ROWS = 500  # of each model table; `preemptd state` lists them all


def window(since: str | None, until: str | None) -> Window:
    """The window of `--from` and `--to`: each a log position, or a time (ISO 8601, UTC unless
    it says otherwise)."""
    first, last, start, end = 0, None, None, None
    if since is not None:
        first, start = _bound(since, "--from")
    if until is not None:
        last, end = _bound(until, "--to")
        last = last or None
    return Window(first=first, last=last, since=start, until=end)


def _bound(text: str, option: str) -> tuple[int, int | None]:
    """(log position, None) for a number, (0, epoch milliseconds) for a time."""
    if text.isdigit():
        return int(text), None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a log position (a number) or a time such as 2026-11-21T09:43:05Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return 0, int(moment.timestamp() * 1000)


async def build(history: History, *, window: Window, partition: str | None, title: str, quiet: bool, desc: str = "report") -> dict[str, Any]:
    """Fold the log through a `Timeline` (from its start: the state needs the whole history)."""
    last = await history.store.last_seq()
    through = last if window.last is None else min(last, window.last)
    timeline = Timeline(history.log_id, through - window.first, window=window, partition=partition)
    with tqdm(total=through, unit="rec", unit_scale=True, disable=quiet or None, file=sys.stderr, desc=desc) as bar:
        async for page_records in history.records(until=window.last):
            stepped, done = 0, False
            for record in page_records:
                if done := window.passed(record):
                    break
                timeline.step(record)
                stepped += 1
            bar.update(stepped)
            if done:
                break
    for dead in await history.store.dead_letters(_MAX_DEAD_LETTERS):
        timeline.dead_letter(dead.received, dead.partition, dead.reason, dead.event_id)
    data = timeline.result(title)
    for drawn in data["partitions"]:  # the model's own tables (Kueue's cohorts, Volcano's jobs), as `state` shows them at the window's end
        drawn["tables"] = tables_text(timeline.state.partitions[drawn["name"]], _TABLE_ROWS)
    return data


def with_comparison(data: dict[str, Any], other: dict[str, Any], other_name: str) -> dict[str, Any]:
    return {**data, "compare": compare(data, other, other_name)}


#: What the ids of the decisions only a what-if replay made start with: the log has none of them,
#: and an id of the log's could be the same (a replay numbers its decisions as the log does).
WHAT_IF = "what-if:"


def what_if(data: dict[str, Any], replayed: ReplayReport, other_name: str) -> dict[str, Any]:
    """The report of a log, with the decisions a what-if replay found to differ."""
    only_stored = [to_builtins(d) for change in replayed.changes for d in change.only_stored]
    only_new = [{**to_builtins(d), "id": f"{WHAT_IF}{d.id}"} for change in replayed.changes for d in change.only_new]  # not the log's: an id of their own
    same = replayed.stored_decisions - len(only_stored)
    return {**data, "compare": {"other": other_name, "only_here": only_stored, "only_other": only_new, "same": same}}


def page(data: dict[str, Any]) -> str:
    """The HTML page: the data as gzipped JSON in base64 in a script element (a day's decisions
    are tens of megabytes of JSON, a tenth of that gzipped; base64 holds no `<`, so no name in the
    log can end the element), uPlot and the drawing code inline."""
    payload = base64.b64encode(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), compresslevel=6, mtime=0)).decode()
    asset = {name: (_ASSETS / name).read_text(encoding="utf-8") for name in ("uPlot.min.css", "report.css", "uPlot.iife.min.js", "report.js")}
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(data['title'])}</title><style>{asset['uPlot.min.css']}\n{asset['report.css']}</style></head>\n"
        "<body><noscript>This report draws its charts and tables with JavaScript, inline in this file (it loads nothing from the network): allow "
        'scripts for it.</noscript><div id="report"></div>\n'
        f'<script type="application/gzip;base64" id="report-data">{payload}</script>\n'
        f"<script>{asset['uPlot.iife.min.js']}</script>\n<script>{asset['report.js']}</script>\n</body></html>\n"
    )


def page_data(text: str) -> dict[str, Any]:
    """The data a page carries (for tests and tools)."""
    start = text.index('id="report-data">') + len('id="report-data">')
    return json.loads(gzip.decompress(base64.b64decode(text[start : text.index("</script>", start)])))


def write_report(output: Path, data: dict[str, Any]) -> None:
    try:
        output.write_text(page(data), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror}") from None
    decisions = sum(len(p["decisions"]) for p in data["partitions"])
    queues = sum(len(p["queues"]) for p in data["partitions"])
    print(f"wrote {output} ({output.stat().st_size / 1e6:.1f} MB): {counted(decisions, 'decision')}, {counted(queues, 'queue')}", file=sys.stderr)
