"""`preemptd schema`: the JSON Schema of cluster events, decisions, a query or its answer."""

from __future__ import annotations

import argparse
import json

from preemptd.events import json_schema
from preemptd.scheduling import MODELS

NAME = "schema"
HELP = "print the JSON Schema of cluster events, decisions, or a query and its answer"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "kind",
        nargs="?",
        default="cluster",
        choices=["cluster", "decisions", "try", "answer"],
        help="what shims send (default), what the daemon publishes, a query of preemptd.try.<partition> or its answer",
    )


def run(args: argparse.Namespace) -> int:
    if args.kind in ("try", "answer"):
        from ...queries import schema

        print(json.dumps(schema(args.kind), indent=2))
        return 0
    print(json.dumps(json_schema(args.kind, models=sorted(MODELS)), indent=2))
    return 0
