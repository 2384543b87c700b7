"""Alembic migrations of the log database. Applied at start-up and by `preemptd db upgrade`."""

from pathlib import Path

#: The Alembic script location.
LOCATION = Path(__file__).parent
