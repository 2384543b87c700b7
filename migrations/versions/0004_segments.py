"""Archived segments (issue 29): the log is cut at snapshots into segments; each closed segment
is written to the archive (one compressed file, `daemon/log/archive.py`) and, once retention lets
it go, deleted from the live log. `segments` lists every segment written, where its file is and
whether its rows are still live (`dropped` is when they left). A snapshot that closes a segment
is a `boundary`: kept until the segment it starts is archived (its file carries it).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "segments",
        sa.Column("first", sa.BigInteger(), nullable=False),
        sa.Column("last", sa.BigInteger(), nullable=False),
        sa.Column("records", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("first_received", sa.BigInteger(), nullable=False),
        sa.Column("last_received", sa.BigInteger(), nullable=False),
        sa.Column("location", sa.Text(), nullable=False),
        sa.Column("archived", sa.BigInteger(), nullable=False),
        sa.Column("dropped", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("first"),
    )
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("boundary", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("boundary")
    op.drop_table("segments")
