"""The README's report screenshots, made as a user would make them (1400x900, headless Chromium):

- docs/report.png: the first session, played against a real daemon on its embedded defaults
  (examples/events/quickstart-*.yaml published as the README says), then `preemptd report`;
- docs/report-kueue.png and docs/report-volcano.png: `preemptd simulate` of an example of each
  model, then `preemptd report`; docs/report-quota.png the same of YuniKorn's quota
  enforcement (examples/quota-enforcement.yaml).

    .venv/bin/python docs/screenshots.py

Needs `chromium` on the PATH. Takes about half a minute (the first session waits out the 5 s
preemption delay).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREEMPTD = str(Path(sys.executable).parent / "preemptd")
SIZE = "1400,900"


def main() -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("screenshots: no chromium on the PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shoot(browser, first_session(work), ROOT / "docs" / "report.png")
        for model, example in (("kueue", "kueue/reclaim-within-cohort"), ("volcano", "volcano/hierarchical-capacity"), ("quota", "quota-enforcement")):
            shoot(browser, simulated(work, example, model), ROOT / "docs" / f"report-{model}.png")


def first_session(work: Path) -> Path:
    """The README's first session: the daemon, the three publishes, Ctrl-C, the report."""
    daemon = subprocess.Popen([PREEMPTD, "run"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert daemon.stdout is not None
    for line in daemon.stdout:  # wait until shims can publish
        if "listening on" in line:
            break
    else:
        sys.exit("screenshots: the daemon stopped before it listened")
    publish(work, "quickstart-1.yaml")
    time.sleep(1)
    publish(work, "quickstart-2.yaml")
    time.sleep(8)  # team a waits out its queue's 5 s preemption delay; its tasks preempt
    publish(work, "quickstart-3.yaml")
    time.sleep(2)
    daemon.send_signal(signal.SIGINT)
    daemon.wait(timeout=30)
    page = work / "quickstart.html"
    run("report", "-o", str(page), "--title", "preemptd report of the first session", cwd=work)
    return page


def simulated(work: Path, example: str, model: str) -> Path:
    db, page = work / f"{model}.db", work / f"{model}.html"
    run("simulate", str(ROOT / "examples" / f"{example}.yaml"), "--quiet", "--db", str(db), cwd=work)
    run("report", "--db", str(db), "-o", str(page), "--quiet", "--title", f"preemptd report of examples/{example}.yaml", cwd=work)
    return page


def publish(work: Path, name: str) -> None:
    run("publish", str(ROOT / "examples" / "events" / name), cwd=work)


def run(*args: str, cwd: Path) -> None:
    done = subprocess.run([PREEMPTD, *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"screenshots: preemptd {' '.join(args)} failed: {done.stderr.strip()}")


def shoot(browser: str, page: Path, png: Path) -> None:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", f"--user-data-dir={page.parent / 'chromium'}"]
    subprocess.run(
        [browser, *flags, f"--window-size={SIZE}", "--virtual-time-budget=5000", f"--screenshot={png}", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    print(f"wrote {png.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
