"""Configuration that lives with the cluster (issue 39): the daemon follows its `--config` file
as YuniKorn follows its ConfigMap; `preemptd apply` hands a running daemon a file as `kubectl
apply` does; and no restart undoes a configuration newer than its file. Against a real daemon,
nats-server and log."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from conftest import preemptd
from test_daemon import wait_for

pytestmark = pytest.mark.slow


def queues(analytics_max: int) -> str:
    return f"""\
queues:
  - name: root
    queues:
      - name: tenants
        queues:
          - name: analytics
            resources: {{max: {{vcore: {analytics_max}}}}}
          - name: web
"""


def configs(db: Path) -> list[dict]:
    """The `config.applied` of the log, oldest first."""
    with sqlite3.connect(db) as conn:
        return [json.loads(payload) | {"seq": seq} for seq, payload in conn.execute("select seq, payload from log where type = 'config.applied' order by seq")]


def analytics_max(db: Path) -> int:
    return configs(db)[-1]["config"]["queues"][0]["queues"][0]["queues"][0]["resources"]["max"]["vcore"]


def test_the_daemon_follows_its_file_through_renames_and_symlink_swaps_and_keeps_going_when_it_is_refused(daemon_factory, tmp_path: Path) -> None:
    """A ConfigMap mounted in a pod is swapped through a symlink (`..data`); an editor renames
    its new file over the old. Either way the daemon applies the new content within seconds
    and says what changed; a content its model refuses keeps the configuration in force, said
    in one line, counted and kept as a dead letter, and the daemon goes on."""
    mounted = tmp_path / "configmap"
    (mounted / "v1").mkdir(parents=True)
    (mounted / "v1" / "queues.yaml").write_text(queues(48))
    os.symlink("v1", mounted / "..data")
    os.symlink("..data/queues.yaml", mounted / "queues.yaml")
    daemon = daemon_factory("--config", str(mounted / "queues.yaml")).start()
    db = daemon.state_dir / "preemptd.db"
    assert analytics_max(db) == 48

    (mounted / "v2").mkdir()
    (mounted / "v2" / "queues.yaml").write_text(queues(24))
    os.symlink("v2", mounted / "..data.new")
    os.replace(mounted / "..data.new", mounted / "..data")  # as the kubelet swaps a ConfigMap's files
    wait_for(lambda: analytics_max(db) == 24, what="the swapped ConfigMap applied")
    assert configs(db)[-1]["source"] == str(mounted / "queues.yaml"), "the path as given, not the version it points to"
    wait_for(lambda: "queue root.tenants.analytics: max vcore 48 -> vcore 24" in daemon.log_text(), what="the change said (logged after the commit)")

    edited = mounted / "queues.yaml.swp"
    edited.write_text(queues(12))
    os.replace(edited, mounted / "queues.yaml")  # an editor saving by rename
    wait_for(lambda: analytics_max(db) == 12, what="the renamed file applied")

    (mounted / "queues.yaml").unlink()
    (mounted / "queues.yaml").write_text("queues: [{name: root, queues: [{name: tenants, queues: [{name: analytics, resources: {max: {vcore: -1}}}]}]}]\n")
    wait_for(lambda: "config file refused, the configuration in force stays" in daemon.log_text(), what="the refusal said")
    with sqlite3.connect(db) as conn:
        [(subject, reason)] = conn.execute("select subject, reason from dead_letters").fetchall()
    assert subject == f"file:{mounted / 'queues.yaml'}" and "analytics" in reason, reason
    assert analytics_max(db) == 12, "the configuration in force stays"
    assert daemon.process.poll() is None and daemon.stop() == 0


def test_apply_hands_a_file_to_the_running_daemon_and_a_dry_run_says_what_it_would_change(daemon_factory, tmp_path: Path) -> None:
    daemon = daemon_factory().start()
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(queues(48))
    second.write_text(queues(24))
    state = ["--state-dir", str(daemon.state_dir)]
    applied = preemptd("apply", str(first), *state)
    assert applied.returncode == 0, applied.stderr
    db = daemon.state_dir / "preemptd.db"
    wait_for(lambda: configs(db) and analytics_max(db) == 48, what="the file applied")

    published = preemptd("publish", str(second), *state)
    assert (
        published.returncode == 2
        and f"{second} is a configuration, not events: hand it to the running daemon with `preemptd apply {second}`" in published.stderr
    ), published.stderr

    dry = preemptd("apply", str(second), "--dry-run", *state)
    assert dry.returncode == 0, dry.stderr
    assert "partition default (yunikorn)" in dry.stdout and "it would change" in dry.stdout
    assert "queue root.tenants.analytics: max vcore 48 -> vcore 24" in dry.stdout
    assert analytics_max(db) == 48, "a dry run sends nothing"

    assert preemptd("apply", str(second), *state).returncode == 0
    wait_for(lambda: analytics_max(db) == 24, what="the second file applied")
    explained = preemptd("explain", configs(db)[-1]["id"], *state)
    assert explained.returncode == 0, explained.stderr
    assert f"from {second} (sha256 " in explained.stdout
    assert f"changed from the one at log seq {configs(db)[-2]['seq']}:" in explained.stdout and "max vcore 48 -> vcore 24" in explained.stdout
    assert daemon.stop() == 0


def test_a_restart_with_an_unchanged_file_keeps_a_newer_configuration(daemon_factory, tmp_path: Path) -> None:
    """A daemon restarted with its unchanged file re-applied it: root.tenants.analytics max 24,
    applied since, went back to 48. The file goes in again only once its content changes."""
    config, newer = tmp_path / "queues.yaml", tmp_path / "newer.yaml"
    config.write_text(queues(48))
    newer.write_text(queues(24))
    daemon = daemon_factory("--config", str(config)).start()
    db = daemon.state_dir / "preemptd.db"
    assert preemptd("apply", str(newer), "--state-dir", str(daemon.state_dir)).returncode == 0
    wait_for(lambda: analytics_max(db) == 24, what="the newer configuration applied")
    assert daemon.stop() == 0

    again = daemon_factory("--config", str(config), state_dir=daemon.state_dir).start()
    assert analytics_max(db) == 24 and len(configs(db)) == 2, "nothing appended"
    assert "config file unchanged since it applied it: the log's configuration runs" in again.log_text()
    assert f"came_from={newer}" in again.log_text()
    assert again.stop() == 0

    config.write_text(queues(36))  # changed while the daemon was down: it goes in
    third = daemon_factory("--config", str(config), state_dir=daemon.state_dir).start()
    assert analytics_max(db) == 36
    assert third.stop() == 0
