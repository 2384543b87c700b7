"""`preemptd report`: the page of a log's timeline, from the user guide's examples and a Kueue
and a Volcano one; what it holds is read back from the data the page carries, and the page is
opened in a real headless browser."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest
import yaml
from conftest import ROOT, preemptd

from preemptd.daemon.cli import page as report
from preemptd.events import Scenario, to_builtins
from preemptd.scheduling import curve_unit, model_named, simulate

EXAMPLES = ["general", "allow-preemption", "priority-queues", "fence", "kueue/reclaim-within-cohort", "volcano/hierarchical-capacity"]
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
BROWSER_REQUIRED = os.environ.get("PREEMPTD_TEST_BROWSER") == "required"  # .ci/run sets it


def report_of(tmp_path: Path, scenario: Path, *options: str, name: str = "log") -> tuple[dict, str, Path]:
    """Simulate `scenario` into a log, report it: the page's data, the page, and the log."""
    db = tmp_path / f"{name}.db"
    simulated = preemptd("simulate", str(scenario), "--quiet", "--db", str(db))
    assert simulated.returncode == 0, simulated.stderr
    page = tmp_path / f"{name}.html"
    made = preemptd("report", "--db", str(db), "-o", str(page), "--quiet", *options)
    assert made.returncode == 0, made.stderr
    html = page.read_text()
    return page_data(html), html, db


def page_data(html: str) -> dict:
    return report.page_data(html)


@pytest.mark.parametrize("example", EXAMPLES)
def test_a_report_shows_every_queue_its_bounds_and_every_preemption_with_its_victims(example: str, tmp_path: Path) -> None:
    path = ROOT / "examples" / f"{example}.yaml"
    scenario = msgspec.yaml.decode(path.read_bytes(), type=Scenario)
    result = simulate(scenario)
    data, html, _ = report_of(tmp_path, path)
    assert "uPlot" in html and not re.search(r'(src|href)="(https?:)?//', html), "self-contained: nothing fetched from the network"
    (partition,) = data["partitions"]
    view = result.state.partitions[scenario.partition]
    assert partition["model"] == view.model
    assert [q["path"] for q in partition["queues"]] == sorted(view.queues, key=lambda p: view.queues[p].lineage[::-1]), "the whole tree, in tree order"
    for path, curves in model_named(view.model).views.curves(view).items():  # every line ends where the model says the queue is
        series = next(q for q in partition["queues"] if q["path"] == path)["series"]
        for name, amounts in curves.items():
            for resource, amount in amounts.items():
                assert series[resource][name][-1] == curve_unit(resource, amount), f"{path}'s {name} line of {resource}"
    decided = [to_builtins(d) for d in result.decisions]
    shown = partition["decisions"]
    assert [d["id"].split(":", 1)[1] for d in shown] == [d["id"].split(":", 1)[1] for d in decided], "every decision, none dropped"
    for theirs in decided:
        del theirs["partition"], theirs["ts"]
    for mine, theirs in zip(shown, decided):
        if theirs["type"] == "decision.preempted":
            assert [v["task"] for v in mine["victims"]] == [v["task"] for v in theirs["victims"]]
    assert partition["summary"]["decisions"] == {t: sum(1 for d in decided if d["type"] == t) for t in {d["type"] for d in decided}}


def test_the_summary_ranks_the_queues_short_of_their_guarantee_and_the_longest_waits(tmp_path: Path) -> None:
    data, _, _ = report_of(tmp_path, ROOT / "examples" / "general.yaml")
    summary = data["partitions"][0]["summary"]
    assert summary["under_guarantee"][0]["queue"] == "root.normal.queue-2", "queue-2 waits under its guarantee while queue-1 holds the room"
    waits = summary["longest_waits"]
    assert waits == sorted(waits, key=lambda w: -w["seconds"]) and waits[0]["seconds"] > 0


def test_kueues_longest_waits_count_a_workloads_wait_for_admission(tmp_path: Path) -> None:
    """Kueue admits workloads and places no pods: its report said no wait at all while urgent
    waited 2 s for the workload it evicted to go; a workload still waiting is one entry, not a pod each."""
    data, _, _ = report_of(tmp_path, ROOT / "examples" / "kueue" / "within-cluster-queue.yaml")
    waits = {w["task"]: w["seconds"] for w in data["partitions"][0]["summary"]["longest_waits"]}
    assert waits == {"low-2": 19.0, "urgent": 2.0, "low-1": 0.0}, waits


def test_a_window_of_log_positions_keeps_the_decisions_inside_it(tmp_path: Path) -> None:
    whole, _, db = report_of(tmp_path, ROOT / "examples" / "general.yaml")
    seqs = [d["seq"] for d in whole["partitions"][0]["decisions"]]
    middle = seqs[len(seqs) // 2]
    part = page_data(_report(db, tmp_path, "--from", str(middle), "--to", str(seqs[-1])))
    assert [d["seq"] for d in part["partitions"][0]["decisions"]] == [s for s in seqs if s >= middle]
    assert part["period"]["from"]["seq"] == middle
    assert part["partitions"][0]["times"][0] == part["period"]["from"]["t"], "the curves start where the window does"


def test_another_configuration_of_the_same_history_shows_the_decisions_that_differ(tmp_path: Path) -> None:
    general = ROOT / "examples" / "general.yaml"
    document = yaml.safe_load(general.read_text())
    document["config"] = yaml.safe_load((ROOT / "examples" / "what-if" / "general-bigger-guarantee.yaml").read_text())
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(yaml.safe_dump(document))
    _, _, other = report_of(tmp_path, bigger, name="bigger")
    data, _, _ = report_of(tmp_path, general, "--compare", str(other))
    diff = data["compare"]
    assert diff["other"] == str(other) and (diff["only_here"] or diff["only_other"]) and diff["same"] > 0
    assert all(d["type"].startswith("decision.") for d in diff["only_here"] + diff["only_other"])
    same, _, _ = report_of(tmp_path, general, "--compare", str(tmp_path / "log.db"), name="again")
    assert same["compare"]["only_here"] == [] and same["compare"]["only_other"] == []


def test_names_from_shims_cannot_end_the_pages_data_or_run_in_it(tmp_path: Path) -> None:
    hostile = "</script><script>document.title='owned'</script><!--"
    scenario = tmp_path / "hostile.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "hostile",
                "config": {},
                "events": [
                    {"type": "node.upserted", "node": "n1", "capacity": {"vcore": 1}},
                    {"type": "task.submitted", "task": hostile, "app": "a", "queue": "root.default", "resources": {"vcore": 1}},
                ],
            }
        )
    )
    data, html, _ = report_of(tmp_path, scenario)
    assert "</script><script>document" not in html and data["partitions"][0]["decisions"][0]["task"] == hostile
    if BROWSER:
        assert _rendered(tmp_path / "log.html").get("title") != "owned"


def test_an_unknown_partition_or_window_is_a_one_line_refusal(tmp_path: Path) -> None:
    _, _, db = report_of(tmp_path, ROOT / "examples" / "general.yaml")
    for options, said in (
        (["--partition", "gpu"], "no partition 'gpu'"),
        (["--from", "yesterday"], "--from 'yesterday': expected a log position (a number) or a time"),
    ):
        refused = preemptd("report", "--db", str(db), "-o", str(tmp_path / "x.html"), "--quiet", *options)
        assert refused.returncode == 2 and said in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("example", "bounds"),
    [
        ("general", ("guaranteed", "max")),
        ("kueue/reclaim-within-cohort", ("nominal quota", "borrowing limit")),
        ("volcano/hierarchical-capacity", ("deserved", "capability")),
    ],
)
def test_the_page_opens_in_a_headless_browser_without_a_script_error_in_its_models_words(example: str, bounds: tuple[str, str], tmp_path: Path) -> None:
    """The page draws, and names a queue's bounds as the model's users do, in its summary and legend."""
    guarantee, most = bounds
    data, _, _ = report_of(tmp_path, ROOT / "examples" / f"{example}.yaml")
    bounds = [c for c in data["partitions"][0]["curves"] if c["kind"] == "bound"]
    assert (bounds[0]["words"], next(c["words"] for c in bounds if c["name"] == "max")) == (guarantee, most), "the summary's bound first"
    _browser()
    body = _rendered(tmp_path / "log.html")
    assert body.get("data-rendered") == "ok" and "data-error" not in body, body
    assert f"Longest under {guarantee} with asks pending" in body["dom"] and f"{most} (dotted red line)" in body["dom"]


def _report(db: Path, tmp_path: Path, *options: str) -> str:
    page = tmp_path / "window.html"
    made = preemptd("report", "--db", str(db), "-o", str(page), "--quiet", *options)
    assert made.returncode == 0, made.stderr
    return page.read_text()


def _rendered(page: Path, *, then: str = "", size: str = "1400,900") -> dict[str, str]:
    """The page as the browser left it after its scripts ran (and `then`, a script run once the
    page has drawn): the body's attributes, the title and the DOM."""
    if then:
        waiting = "(function wait() { if (document.body.dataset.rendered !== 'ok') return setTimeout(wait, 20); %s })();" % then
        page.write_text(page.read_text().replace("</body>", f"<script>{waiting}</script></body>"))
    profile = page.parent / "chromium-profile"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ]
    dom = subprocess.run(
        [BROWSER, *flags, f"--user-data-dir={profile}", f"--window-size={size}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    body = re.search(r"<body([^>]*)>", dom)
    assert body, dom[:500]
    found = {key: html.unescape(value) for key, value in re.findall(r'([\w-]+)="([^"]*)"', body.group(1))}
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    return {**found, "title": title.group(1) if title else "", "dom": dom}


def _browser() -> None:
    if not BROWSER:
        if BROWSER_REQUIRED:
            pytest.fail("no chromium on PATH, and PREEMPTD_TEST_BROWSER=required")
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium); .ci/run installs it")


#: Run in the page once drawn: the text of what is on the first screen (1400x900) in the strip
#: and the decision table, then a click on the strip's first preemption and what the table shows.
_FIRST_SCREEN = """
const seen = (selector) => [...document.querySelectorAll(selector)]
  .filter((n) => { const b = n.getBoundingClientRect(); return b.width > 0 && b.top >= 0 && b.bottom <= innerHeight; })
  .map((n) => n.textContent);
document.body.dataset.strip = JSON.stringify(seen(".strip text.who, .strip text.why"));
document.body.dataset.rows = JSON.stringify(seen(".decisions tbody tr"));
document.querySelector(".strip .preemption").dispatchEvent(new MouseEvent("click", { bubbles: true }));
document.body.dataset.focused = JSON.stringify({
  caption: document.querySelector(".decisions .caption").textContent,
  ids: [...document.querySelectorAll(".decisions tbody tr")].map((r) => r.dataset.id),
  open: [...document.querySelectorAll(".decisions tbody details")].every((d) => d.open),
});
"""


@pytest.mark.parametrize("example", ["general", "kueue/reclaim-within-cohort", "volcano/hierarchical-capacity"])
def test_the_first_screen_says_who_preempted_whom_and_why(example: str, tmp_path: Path) -> None:
    """At 1400x900, without scrolling: the strip labels the first preemption preemptor -> victims
    with its reason, and the decision table's rows give the reason and each victim's why; a click
    on the strip lists that preemption's decisions with their explanations open."""
    data, _, _ = report_of(tmp_path, ROOT / "examples" / f"{example}.yaml")
    _browser()
    body = _rendered(tmp_path / "log.html", then=_FIRST_SCREEN)
    assert body.get("data-rendered") == "ok" and "data-error" not in body, body.get("data-error")
    strip, rows, focused = (json.loads(body[f"data-{name}"]) for name in ("strip", "rows", "focused"))
    decisions = [d for d in data["partitions"][0]["decisions"] if d["type"] in ("decision.preempted", "decision.evicted")]
    first = decisions[0]
    if first["type"] == "decision.preempted":  # Volcano: a job's gang preempts for its tasks in one cycle, one preemption drawn
        mine = [d for d in decisions if d["cycle"] == first["cycle"] and d["app"] == first["app"]] if example.startswith("volcano") else [first]
        preemptor, victims, reason, why = first["preemptor"], [v["task"] for d in mine for v in d["victims"]], first["reason"], first["victims"][0]["why"]
    else:  # Kueue: one eviction per victim of the preemptor, in the same cycle
        mine = [d for d in decisions if d["cycle"] == first["cycle"] and d["preemptor"] == first["preemptor"]]
        preemptor, victims, reason, why = first["preemptor"], [d["app"] for d in mine], first["reason"], first["message"]
    drawn = f"job {first['app']} ({len(mine)} tasks)" if first["type"] == "decision.preempted" and len(mine) > 1 else preemptor
    assert f"{drawn} → {', '.join(victims[:2])}" in strip[0], strip
    assert reason.startswith(strip[1].rstrip("…")), (reason, strip)
    shown = next(row for row in rows if first["queue"] in row and preemptor in row)
    assert why in shown and reason[:40] in shown, shown
    assert focused["ids"] == [d["id"] for d in mine] and focused["open"], focused
    assert drawn in focused["caption"]


def test_a_what_if_replay_writes_the_report_of_the_log_with_the_decisions_another_configuration_changes(tmp_path: Path) -> None:
    _, _, db = report_of(tmp_path, ROOT / "examples" / "general.yaml")
    what_if = ROOT / "examples" / "what-if" / "general-bigger-guarantee.yaml"
    replay = preemptd("replay", "--db", str(db), "--config", str(what_if), "--report", str(tmp_path / "what-if.html"), "--quiet")
    assert replay.returncode == 0, replay.stderr
    said = re.search(r"(\d+) stored decisions not made, (\d+) new decisions", replay.stdout)
    diff = page_data((tmp_path / "what-if.html").read_text())["compare"]
    assert (len(diff["only_here"]), len(diff["only_other"])) == (int(said.group(1)), int(said.group(2))), "the page says what replay says"
    assert diff["other"] == f"--config {what_if}" and diff["same"] == 23 - len(diff["only_here"])
    logged = {d["id"] for d in page_data((tmp_path / "what-if.html").read_text())["partitions"][0]["decisions"]}
    assert diff["only_other"] and all(d["id"].startswith("what-if:") and d["id"] not in logged for d in diff["only_other"]), "ids of their own, none the log's"
    alone = preemptd("replay", "--db", str(db), "--report", str(tmp_path / "x.html"))
    assert alone.returncode == 2 and "give it with --config" in alone.stderr


def test_curves_of_a_long_log_are_sampled_and_every_series_has_a_value_per_sample() -> None:
    from preemptd.scheduling import Timeline

    scenario = msgspec.yaml.decode((ROOT / "examples" / "general.yaml").read_bytes(), type=Scenario)
    records = simulate(scenario).records
    timeline = Timeline("sim", len(records), samples=10)
    for record in records:
        timeline.step(record)
    (partition,) = timeline.result("sampled")["partitions"]
    assert 3 <= len(partition["times"]) <= 10 + 3, "about `samples` points: the first record, every stride, the end and its hold"
    for queue in partition["queues"]:
        for series in queue["series"].values():
            assert {len(values) for values in series.values()} == {len(partition["times"])}
    assert len(partition["decisions"]) == 23, "decisions are never sampled"


def test_a_partition_that_changes_model_is_drawn_with_each_models_curves() -> None:
    """A YuniKorn partition configured again as Volcano: its queues' series gain Volcano's
    curves from then on (the report, and `explain <queue>` which reads it, failed with a
    KeyError on the first curve YuniKorn has not, for the queue both models have: root)."""
    from preemptd.events import ConfigApplied, NodeUpserted, Resources
    from preemptd.projections import LogRecord
    from preemptd.scheduling import Timeline, queue_usage

    yunikorn = ConfigApplied(id="yunikorn", ts=0, model="yunikorn", config={"queues": [{"name": "root", "resources": {"max": {"vcore": 8}}}]})
    node = NodeUpserted(id="n", ts=0, node="n1", capacity=Resources({"vcore": 8000}))
    volcano = ConfigApplied(id="to-volcano", ts=0, model="volcano", config={})
    timeline = Timeline("sim", 3, samples=10)
    for record in [LogRecord(1, 0, yunikorn), LogRecord(2, 0, node), LogRecord(3, 5000, volcano)]:
        timeline.step(record)
    (partition,) = timeline.result("changed")["partitions"]
    assert partition["model"] == "volcano"
    (root,) = [q for q in partition["queues"] if q["path"] == "root"]
    assert {"max", "deserved"} <= set(root["series"]["vcore"]), root["series"]
    for series in root["series"].values():
        assert {len(values) for values in series.values()} == {len(partition["times"])}
    assert queue_usage(partition, ("root",), ())[0].startswith("usage from ")


def _sampled_at_instant_ends(records: list, samples: int) -> list[float]:
    """Each point of root.default's allocated curve is what the queue held once every record of
    its instant was folded (checked by folding the log again); the curve's values."""
    from preemptd.projections import ClusterState
    from preemptd.scheduling import Timeline, apply

    timeline = Timeline("sim", len(records), samples=samples)
    for record in records:
        timeline.step(record)
    (partition,) = timeline.result("sampled")["partitions"]
    (queue,) = [q for q in partition["queues"] if q["path"] == "root.default"]
    allocated = queue["series"]["vcore"]["allocated"]
    assert len(partition["times"]) >= 3
    state, folded = ClusterState(log_id="sim"), iter(records)
    pending = next(folded)
    for t, value in zip(partition["times"][:-1], allocated[:-1], strict=True):  # the last point is the end's hold
        while pending is not None and pending.received <= t * 1000:
            apply(state, pending)
            pending = next(folded, None)
        held = state.partitions["default"].queues["root.default"].allocated.get("vcore", 0) // 1000
        assert value == held, f"at {t} s the curve says {value}, the queue held {held} once the instant's records were folded"
    return allocated


def _bursts(count: int, size: int) -> list:
    """The records of `count` bursts of `size` one-core tasks, a second apart, each allocated in one cycle."""
    events = [{"type": "node.upserted", "node": "n1", "capacity": {"vcore": count * size}}]
    events += [
        {"at": f"{1 + b}s", "type": "task.submitted", "task": f"t{b}-{i}", "app": f"a{b}", "queue": "root.default", "resources": {"vcore": 1}}
        for b in range(count)
        for i in range(size)
    ]
    return simulate(
        msgspec.convert({"name": "bursts", "config": {"queues": [{"name": "default"}]}, "events": events, "until": f"{count + 2}s"}, Scenario)
    ).records


def test_a_curve_is_sampled_between_cycles_never_within_one() -> None:
    """300 tasks arrive at once and one cycle allocates them all: with samples due every few
    records, each point is what the queue held once every record of its instant was folded
    (here 0, then 300 vcores), never a part of the cycle's decisions."""
    assert set(_sampled_at_instant_ends(_bursts(1, 300), samples=40)) <= {0, 300}


def test_the_curves_of_a_long_generated_log_are_sampled_at_cycle_boundaries_only() -> None:
    """200 bursts of 50 tasks (about 20,000 records), 100 samples: every point is a multiple of
    50, the queue's usage between two cycles."""
    allocated = _sampled_at_instant_ends(_bursts(200, 50), samples=100)
    assert len(allocated) > 50 and all(value % 50 == 0 for value in allocated), allocated


def test_an_eviction_shows_how_long_the_workload_it_makes_room_for_waited(tmp_path: Path) -> None:
    """Kueue evicts workloads for a workload (its preemptor is an application): the wait shown
    is that workload's, found by its name among applications, whatever its pods are called."""
    scenario = yaml.safe_load((ROOT / "examples" / "kueue" / "reclaim-within-cohort.yaml").read_text())
    for event in scenario["events"]:
        if event["type"] == "task.submitted":
            event["task"] += "-pod"  # pods named otherwise than their workloads
    path = tmp_path / "renamed.yaml"
    path.write_text(yaml.safe_dump(scenario))
    data, _, _ = report_of(tmp_path, path)
    (partition,) = data["partitions"]
    evictions = [d for d in partition["decisions"] if d["type"] == "decision.evicted" and d.get("preemptor")]
    assert evictions, "the example evicts"
    for eviction in evictions:  # a-1 and sa-1 arrived at 5 s
        assert eviction["waited"] == pytest.approx(eviction["t"] - 5.0), eviction["id"]


_STRIP_LAYOUT = """
const boxes = [...document.querySelectorAll(".strip text")].map((t) => t.getBoundingClientRect());
const overlapping = boxes.some((a, i) => boxes.some((b, j) => j > i && a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom));
const clicked = document.querySelectorAll(".strip .preemption");
clicked[clicked.length - 1].dispatchEvent(new MouseEvent("click", { bubbles: true }));
document.body.dataset.layout = JSON.stringify({
  ticks: clicked.length, overlapping, right: Math.max(...boxes.map((b) => b.right)), width: innerWidth,
  caption: document.querySelector(".decisions .caption").textContent,
});
"""


def test_a_crowded_strip_shares_ticks_and_no_label_overlaps_another(tmp_path: Path) -> None:
    """600 preemptions over two minutes: a tick per few pixels says how many it holds, no label
    covers another or leaves the page, and a click on a tick lists all its preemptions."""
    events = [{"type": "node.upserted", "node": f"n{i}", "capacity": {"vcore": 100}} for i in range(20)]
    events += [{"type": "task.submitted", "task": f"low-{i}", "app": f"low{i % 50}", "queue": "root.low", "resources": {"vcore": 1}} for i in range(2000)]
    events += [
        {"at": f"{10 + i // 5}s", "type": "task.submitted", "task": f"hi-{i}", "app": f"hi{i % 20}", "queue": "root.high", "resources": {"vcore": 1}}
        for i in range(600)
    ]
    queues = [
        {"name": "root", "properties": {"preemption.delay": "1s"}, "queues": [{"name": "low"}, {"name": "high", "resources": {"guaranteed": {"vcore": 1000}}}]}
    ]
    config = {"queues": queues, "preemption": {"max_victims_per_cycle": 100000, "max_share_per_cycle": 1.0}}
    scenario = tmp_path / "crowded.yaml"
    scenario.write_text(yaml.safe_dump({"name": "crowded", "config": config, "events": events, "until": "200s"}))
    data, _, _ = report_of(tmp_path, scenario)
    assert data["partitions"][0]["summary"]["decisions"]["decision.preempted"] == 600
    _browser()
    body = _rendered(tmp_path / "log.html", then=_STRIP_LAYOUT)
    assert body.get("data-rendered") == "ok" and "data-error" not in body, body.get("data-error")
    layout = json.loads(body["data-layout"])
    assert 20 <= layout["ticks"] < 600 and not layout["overlapping"] and layout["right"] <= layout["width"], layout
    assert re.match(r"([2-9]|\d\d+) of 3200 decisions .*preemptions", layout["caption"]), layout["caption"]


def test_one_clock_across_the_page_and_a_word_when_scripts_are_off(tmp_path: Path) -> None:
    """The charts' time axis was uPlot's own: local time, 12-hour (`2:35pm`), beside UTC 24-hour
    times everywhere else; with scripts off the page was blank."""
    report_of(tmp_path, ROOT / "examples" / "general.yaml")
    _browser()
    page = tmp_path / "log.html"
    assert re.search(r"<body><noscript>This report draws its charts and tables with JavaScript[^<]*</noscript>", page.read_text()), "said when scripts are off"
    body = _rendered(
        page,
        then="DATA.absolute_time = true; DATA.period = {from: {t: 1764340200}, to: {t: 1764343800}}; document.body.dataset.ticks = "
        "JSON.stringify(timeTicks(null, [1764340200, 1764341100, 1764342930]));",
    )
    assert json.loads(body["data-ticks"]) == ["14:30", "14:45", "15:15:30"], "UTC, 24-hour, as the rest of the page"


def test_the_report_shows_the_queues_as_the_user_set_them(tmp_path: Path) -> None:
    """Volcano's queue weight, capability and guarantee were nowhere in the report (nor
    YuniKorn's guarantee and max, Kueue's quotas as numbers): the page draws a table of the
    queues in the model's terms, as `state` shows them, beside the model's own tables."""
    report_of(tmp_path, ROOT / "examples" / "volcano" / "hierarchical-capacity.yaml")
    _browser()
    read = (
        "const t = document.querySelector('[data-table=queues]'); document.body.dataset.queues = "
        "JSON.stringify([...t.querySelectorAll('tr')].map((r) => [...r.children].map((c) => c.textContent.trim())));"
    )
    rows = json.loads(_rendered(tmp_path / "log.html", then=read)["data-queues"])
    assert rows[0][:4] == ["queue", "weight", "capability", "guarantee"], rows[0]
    assert ["eng", "1", "cpu 8", "-"] == rows[[r[0] for r in rows].index("eng")][:4], rows


def test_a_gangs_reclaim_is_drawn_as_one_preemption_with_its_victims(tmp_path: Path) -> None:
    """A Volcano job reclaiming for its gang makes a decision per task in one cycle: the strip
    drew as many overlapping labels. It draws one, the job's, with every victim."""
    data, _, _ = report_of(tmp_path, ROOT / "examples" / "volcano" / "reclaim-weighted-queues.yaml")
    per_task = [d for d in data["partitions"][0]["decisions"] if d["type"] == "decision.preempted" and d["app"] == "train"]
    assert len({d["preemptor"] for d in per_task}) > 1, "the gang's tasks each preempt"
    _browser()
    read = "document.body.dataset.who = JSON.stringify([...document.querySelectorAll('.strip text.who')].map((n) => n.textContent));"
    labels = json.loads(_rendered(tmp_path / "log.html", then=read)["data-who"])
    train = [label for label in labels if "train" in label]
    assert len(train) == 1 and train[0].startswith(f"job train ({len(per_task)} tasks) → "), labels
