"""The log's filesystem turning read-only under a running daemon, as ext4 does after an error
(`errors=remount-ro`): the daemon must stop with one line that says so, lose nothing, and go on
from where it was once the filesystem is back.

    sudo .venv/bin/python bench/disk_faults.py

Needs root (a loop device, `mount`, ext4's `trigger_fs_error`). One run: a 64 MiB ext4 image
mounted with `errors=remount-ro` holds the log; `preemptd run` (bundled nats-server elsewhere)
commits a node; the filesystem is made to fail; a second node is published; the daemon's last
line is printed with its exit status. Then the image is checked (`e2fsck`), mounted again, the
daemon started on the same log and NATS data, and the log must hold both nodes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREEMPTD = [sys.executable, "-m", "preemptd.daemon.cli"]


def sh(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def publish(state: Path, node: str) -> None:
    events = state.parent / f"{node}.yaml"
    events.write_text(f"- {{type: node.upserted, node: {node}, capacity: {{vcore: 8}}}}\n")
    url = (state / "nats.url").read_text().strip()
    subprocess.run([*PREEMPTD, "publish", str(events), "--nats-url", url, "--no-wait"], check=True, capture_output=True)


def start(state: Path, db: Path) -> subprocess.Popen[str]:
    daemon = subprocess.Popen([*PREEMPTD, "run", "--state-dir", str(state), "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert daemon.stdout is not None
    daemon.stdout.readline()  # "listening on ..."
    return daemon


def main() -> int:
    if os.geteuid() != 0 or not shutil.which("losetup"):
        print("needs root and losetup (a loop device holds the log's filesystem)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="preemptd-disk-"))
    image, mount, state = work / "log.img", work / "mnt", work / "state"
    mount.mkdir()
    sh("dd", "if=/dev/zero", f"of={image}", "bs=1M", "count=64", "status=none")
    sh("mkfs.ext4", "-q", str(image))
    loop = sh("losetup", "-f", "--show", str(image))
    device = Path(loop).name
    try:
        sh("mount", "-o", "errors=remount-ro", loop, str(mount))
        db = mount / "log.db"
        daemon = start(state, db)
        publish(state, "n1")
        time.sleep(2)
        Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("bench\n")
        publish(state, "n2")
        _, said = daemon.communicate(timeout=60)
        last = said.strip().splitlines()[-1]
        print(f"exit {daemon.returncode}: {last}")
        print(f"lines after the fault that are not logfmt: {sum(1 for line in said.splitlines() if not line.startswith(('ts=', 'preemptd:')))}")
        sh("umount", str(mount))
        subprocess.run(["e2fsck", "-fy", loop], capture_output=True)
        sh("mount", loop, str(mount))
        daemon = start(state, db)
        time.sleep(3)
        daemon.terminate()
        daemon.communicate(timeout=60)
        nodes = subprocess.run([*PREEMPTD, "state", "--db", str(db), "--json"], check=True, capture_output=True, text=True).stdout
        kept = [node for node in ("n1", "n2") if f'"{node}"' in nodes]
        print(f"after the restart the log holds {kept} (want both)")
        return 0 if kept == ["n1", "n2"] and daemon.returncode == 0 else 1
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
        subprocess.run(["losetup", "-d", loop], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
