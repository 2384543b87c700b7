"""Alembic migrations of the log database. Applied at start-up and by `preemptd db upgrade`.

Each revision's id is its file's number (`versions/0002_outbox_tries.py` is revision `0002`),
so that a start on a log already at the newest schema knows it without loading Alembic (a
fifth of the daemon's start-up).
"""

from pathlib import Path

#: The Alembic script location.
LOCATION = Path(__file__).parent

#: Every revision, oldest first, and the newest.
REVISIONS = tuple(sorted(path.name.split("_", 1)[0] for path in (LOCATION / "versions").glob("[0-9]*_*.py")))
HEAD = REVISIONS[-1]

#: The oldest schema the commands that only read a log read as it is, without `db upgrade`:
#: 0004 only added what retention writes (a log without it has no archived segments).
READABLE = "0003"
