"""Write the decisions of every scenario file, as `preemptd simulate` prints them, to
tests/golden/. `test_golden.py` checks that the engine still makes exactly these.

    .venv/bin/python tests/record_decisions.py     # after a change meant to alter decisions

Read the diff (git diff tests/golden) before committing: it is the change's effect.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from preemptd.events import Scenario, encode
from preemptd.scheduling import simulate

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
SCENARIOS = sorted(
    [
        *ROOT.glob("examples/*.yaml"),
        *ROOT.glob("examples/kueue/*.yaml"),
        *ROOT.glob("examples/volcano/*.yaml"),
        *ROOT.glob("examples/quota/*.yaml"),
        *ROOT.glob("tests/scenarios/*.yaml"),
    ]
)


def golden_path(scenario: Path) -> Path:
    return GOLDEN / f"{scenario.parent.name}--{scenario.stem}.jsonl"


def decisions(scenario: Path) -> bytes:
    result = simulate(msgspec.yaml.decode(scenario.read_bytes(), type=Scenario))
    return b"".join(encode(decision) + b"\n" for decision in result.decisions)


def main() -> int:
    for scenario in SCENARIOS:
        golden_path(scenario).write_bytes(decisions(scenario))
    print(f"recorded {len(SCENARIOS)} scenarios in {GOLDEN.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
