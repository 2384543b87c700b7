"""The Volcano model in the daemon: `run --config` with Volcano's Queue objects and the
scheduler's ConfigMap as a user pastes them, jobs published through NATS, the reclaim received
by `tail --json`, and `explain` naming the plugin and rule that took or spared each candidate."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import preemptd

VOLCANO_OBJECTS = """\
model: volcano
config:
  - apiVersion: scheduling.volcano.sh/v1beta1
    kind: Queue
    metadata: {name: research}
    spec: {weight: 1}
  - apiVersion: scheduling.volcano.sh/v1beta1
    kind: Queue
    metadata: {name: production}
    spec: {weight: 1}
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: volcano-scheduler-configmap, namespace: volcano-system}
    data:
      volcano-scheduler.conf: |
        actions: "enqueue, allocate, preempt, reclaim, backfill"
        tiers:
        - plugins:
          - name: priority
          - name: gang
            enablePreemptable: false
          - name: conformance
        - plugins:
          - name: overcommit
          - name: drf
            enablePreemptable: false
          - name: predicates
          - name: proportion
          - name: nodeorder
          - name: binpack
"""


def test_a_volcano_queue_reclaims_its_share_through_the_daemon(daemon_factory, tmp_path: Path) -> None:
    config = tmp_path / "volcano.yaml"
    config.write_text(VOLCANO_OBJECTS)
    daemon = daemon_factory("--config", str(config)).start()
    publish, decisions, decisions_until = daemon.publish, daemon.decisions, daemon.decisions_until

    def preempted(found: list[dict]) -> list[dict]:
        return [d for d in found if d["type"] == "decision.preempted"]

    publish(
        "- {type: node.upserted, node: node-1, capacity: {cpu: 4, pods: 110}}\n"
        "- {type: app.submitted, app: sweep, queue: research, min_available: 1}\n"
        + "".join(f"- {{type: task.submitted, task: sweep-{i}, app: sweep, resources: {{cpu: 1}}}}\n" for i in range(4))
    )
    assert [d["task"] for d in decisions(4)] == ["sweep-0", "sweep-1", "sweep-2", "sweep-3"]

    publish(
        "- {type: app.submitted, app: serve, queue: production, min_available: 2}\n"
        "- {type: task.submitted, task: serve-0, app: serve, resources: {cpu: 1}}\n"
        "- {type: task.submitted, task: serve-1, app: serve, resources: {cpu: 1}}\n"
    )
    reclaimed = preempted(decisions_until(lambda found: len(preempted(found)) >= 2))
    assert [(d["preemptor"], [v["task"] for v in d["victims"]]) for d in reclaimed] == [("serve-0", ["sweep-3"]), ("serve-1", ["sweep-2"])]
    assert reclaimed[0]["reason"].startswith("reclaim: queue production takes back what it deserves (proportion)")
    assert reclaimed[0]["victims"][0]["why"] == "reclaim: queue research held more than it deserves (cpu 2); allowed by gang, conformance, proportion"

    publish("- {type: task.released, task: sweep-3, reason: preempted}\n- {type: task.released, task: sweep-2, reason: preempted}\n")

    def landed(found: list[dict]) -> list[tuple]:
        return [(d["task"], d["node"]) for d in found if d["type"] == "decision.allocated" and d["task"].startswith("serve")]

    assert landed(decisions_until(lambda found: len(landed(found)) >= 2)) == [("serve-0", "node-1"), ("serve-1", "node-1")]
    assert daemon.stop() == 0
    replay = preemptd("replay", "--db", str(daemon.state_dir / "preemptd.db"), "--quiet")
    assert re.search(r"all \d+ decisions reproduced", replay.stdout), replay.stdout + replay.stderr


def test_explain_names_the_plugin_and_rule_that_took_or_spared_each_candidate(tmp_path: Path) -> None:
    db = tmp_path / "volcano.db"
    made = preemptd("simulate", "examples/volcano/reclaimable-false.yaml", "--quiet", "--db", str(db))
    assert made.returncode == 0, made.stderr
    explained = preemptd("explain", "--task", "sim-0", "--db", str(db))
    assert explained.returncode == 0, explained.stderr
    out = explained.stdout
    assert "reason: reclaim: queue science takes back what it deserves (proportion)" in out
    assert "why: reclaim: queue batch held more than it deserves (cpu 2); allowed by gang, conformance, proportion" in out
    assert "spared backup-0: reclaimable: queue archive is not reclaimable" in out
    assert "spared nightly-0: gang: job nightly would drop below min_available 1 (1 ready)" in out
    waiting = preemptd("explain", "--task", "sim-2", "--db", str(db)).stdout
    assert "job sim is not starving (it has its gang of 2): its other tasks wait for free room and evict nothing" in waiting
