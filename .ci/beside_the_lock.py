"""Say which installed distributions differ from a lock file's pins (`.ci/newest` runs it in its
environment of newest releases, so that a failure can be traced to the release that brought it)."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)", re.M)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(lock: str) -> None:
    pinned = {canonical(name): version for name, version in PIN.findall(Path(lock).read_text())}
    installed = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
    differ = [f"  {name} {installed[name]} (lock: {pinned[name]})" for name in sorted(pinned) if name in installed and installed[name] != pinned[name]]
    added = [f"  {name} {installed[name]} (not in the lock)" for name in sorted(set(installed) - set(pinned) - {"pip", "preemptd"})]
    print(f"beside {lock}: {len(differ)} newer or other release(s), {len(added)} not locked", *differ, *added, sep="\n")


if __name__ == "__main__":
    main(sys.argv[1])
