"""Snapshots are stored in parts: a snapshot of a large state, written as one value, was copied
whole by the database driver and again by SQLite, which took the daemon's memory beyond its
budget at every snapshot. A snapshot's bytes are its row's payload followed by its parts in
order (a snapshot written before this revision has no parts).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "snapshot_parts",
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("seq", "part"),
    )


def downgrade() -> None:
    op.drop_table("snapshot_parts")
