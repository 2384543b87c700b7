"""The documentation as a new user reads it: the README's first session and every command
block of the tutorial run in order, pasted as written, against a real daemon (its embedded
nats-server, its SQLite log in `./preemptd-state`); each output shown right under a block is
what the block prints. And every relative link of every Markdown file resolves, anchors included."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

#: The pages whose command blocks run, in the order a reader follows them.
PAGES = (ROOT / "README.md", ROOT / "docs" / "tutorial.md")
#: Commands documented to fail: `publish` of an event the daemon rejects exits 1.
FAILING = {"examples/events/mistyped.yaml": 1}
#: A decision id as `tail` prints it, and the other things that differ from run to run.
DECISION_ID = re.compile(r"\b[0-9a-f]{8}:\d+\.\d+\b")
VARYING = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z"), "<time>"),
    (re.compile(r'"ts": \d+'), '"ts": <ms>'),
    (DECISION_ID, "<id>"),
    (re.compile(r"nats://127\.0\.0\.1:\d+"), "nats://<port>"),
]


@dataclass
class Block:
    """A fenced code block, the prose before it, and whether only blank lines separate it from the block before."""

    lang: str
    text: str
    prose: str
    adjacent: bool


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found, end = [], 0
    for match in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
        prose = text[end : match.start()]
        found.append(Block(match.group(1), match.group(2), prose, adjacent=not prose.strip() and end > 0))
        end = match.end()
    return found


def shown(text: str) -> str:
    for pattern, said in VARYING:
        text = pattern.sub(said, text)
    return text


class Session:
    """A reader's terminals: the daemon and `tail` in the background, the rest in turn."""

    def __init__(self, home: Path) -> None:
        self.home = home
        (home / "examples").symlink_to(ROOT / "examples")
        (home / ".venv" / "bin").mkdir(parents=True)
        command = home / ".venv" / "bin" / "preemptd"
        command.write_text(f'#!/bin/sh\nexec {sys.executable} -m preemptd.daemon.cli "$@"\n')
        command.chmod(0o755)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PREEMPTD_")}
        self.daemon: subprocess.Popen | None = None
        self.tail: subprocess.Popen | None = None
        self.ids: dict[str, str] = {}  # a decision id the page shows -> the one this run made

    def background(self, line: str, name: str) -> subprocess.Popen:
        with open(self.home / f"{name}.out", "w") as out:  # the child has its own copy
            return subprocess.Popen(["bash", "-c", line], cwd=self.home, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self, name: str) -> str:
        path = self.home / f"{name}.out"
        return path.read_text() if path.exists() else ""

    def start_daemon(self, line: str) -> None:
        assert self.daemon is None or self.daemon.poll() is not None, "the page starts a daemon while one runs"
        self.daemon = self.background(line, "daemon")
        self.wait_for(lambda: "listening on" in self.output("daemon"), "the daemon to listen", self.daemon)

    def stop_daemon(self) -> None:
        if self.daemon is not None and self.daemon.poll() is None:
            os.killpg(self.daemon.pid, signal.SIGINT)  # Ctrl-C in its terminal
            assert self.daemon.wait(timeout=60) == 0, self.output("daemon")[-2000:]

    def wait_for(self, done, what: str, process: subprocess.Popen | None = None, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert process is None or process.poll() is None, f"gave up waiting for {what}: {self.output('daemon')[-2000:]}"
            assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
            time.sleep(0.1)

    def preempted(self) -> list[str]:
        return [DECISION_ID.findall(line)[-1] for line in self.output("tail").splitlines() if " preempted " in line]

    def run(self, line: str) -> str:
        if "pip install" in line:  # set up already, as the tests run: what follows it
            line = line.rsplit("&&", 1)[1].strip()
        if line.endswith("pytest"):  # the test suite, which runs this
            return ""
        if re.search(r"\.venv/bin/preemptd run\b", line):
            self.start_daemon(line)
            return ""
        if re.search(r"\.venv/bin/preemptd tail\b", line) and "--count" not in line:
            self.tail = self.background(line, "tail")
            return ""
        if "quickstart-3.yaml" in line:  # the shim evicts the victims once tail showed both preemptions
            self.wait_for(lambda: len(self.preempted()) >= 2, "two preemptions in tail", self.daemon)
            self.ids.update(zip(self.ids, self.preempted(), strict=False))
        for shown_id, made in self.ids.items():
            line = line.replace(shown_id, made)
        done = subprocess.run(["bash", "-c", line], cwd=self.home, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
        expected = next((status for name, status in FAILING.items() if name in line), 0)
        assert done.returncode == expected, f"{line}\nexit {done.returncode}\n{done.stdout[-3000:]}"
        return done.stdout  # and what it said on stderr, as a terminal shows both

    def close(self) -> None:
        for process in (self.tail, self.daemon):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
                process.wait(timeout=60)


def test_the_first_session_and_the_tutorial_run_as_written(tmp_path: Path) -> None:
    session = Session(tmp_path)
    try:
        for page in PAGES:
            printed = ""
            for block in blocks(page):
                if block.lang == "text" and " preempted " in block.text:  # tail's lines: their ids are the ones the page uses next
                    session.ids = dict.fromkeys(DECISION_ID.findall(block.text), "")
                if "Ctrl-C" in block.prose:
                    session.stop_daemon()
                if block.lang == "sh":
                    printed = "".join(session.run(line) for line in block.text.splitlines() if line.strip())
                elif block.lang == "text" and "listening on" in block.text:  # what the daemon prints as it starts
                    missing = [line for line in shown(block.text).splitlines() if line not in shown(session.output("daemon")).splitlines()]
                    assert not missing, f"the daemon did not print: {missing}"
                elif block.lang == "text" and block.adjacent:  # what the block above prints, line for line
                    missing = [line for line in shown(block.text).splitlines() if line.strip() and line not in shown(printed).splitlines()]
                    assert not missing, f"{page.name}: not printed: {missing}\nprinted:\n{printed[-3000:]}"
        assert (tmp_path / "quickstart.html").stat().st_size > 0 and (tmp_path / "what-if.html").stat().st_size > 0
    finally:
        session.close()


# -- links --------------------------------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files() -> list[Path]:
    skipped = {".venv", ".git", "node_modules", ".hypothesis"}
    return sorted(p for p in ROOT.rglob("*.md") if not skipped & set(p.relative_to(ROOT).parts))


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lowercase, punctuation dropped, spaces as dashes."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in re.findall(r"(?m)^#{1,6} (.+)$", text)}


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(re.sub(r"```.*?```", "", page.read_text(), flags=re.S)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor}")
    assert not broken, broken
