"""The log, the decision outbox, dead letters, snapshots, consumer tracking and metadata.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )
    op.create_table(
        "log",
        sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("event_id", sa.String(256), nullable=False, unique=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("partition", sa.String(64), nullable=False),
        sa.Column("ts", sa.BigInteger(), nullable=False),
        sa.Column("received", sa.BigInteger(), nullable=False),
        sa.Column("stream_seq", sa.BigInteger(), nullable=True),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
    )
    op.create_index("log_type_seq", "log", ["type", "seq"])
    op.create_table(
        "outbox",
        sa.Column("seq", sa.BigInteger(), sa.ForeignKey("log.seq"), primary_key=True, autoincrement=False),
        sa.Column("decision_id", sa.String(256), nullable=False),
        sa.Column("subject", sa.String(256), nullable=False),
        sa.Column("published_at", sa.BigInteger(), nullable=True),
    )
    op.create_index("outbox_unpublished", "outbox", ["published_at", "seq"])
    op.create_table(
        "dead_letters",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("received", sa.BigInteger(), nullable=False),
        sa.Column("subject", sa.String(256), nullable=False),
        sa.Column("stream_seq", sa.BigInteger(), nullable=True),
        sa.Column("partition", sa.String(64), nullable=True),
        sa.Column("event_type", sa.String(64), nullable=True),
        sa.Column("event_id", sa.String(256), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
    )
    op.create_table(
        "snapshots",
        sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("created", sa.BigInteger(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
    )
    op.create_table(
        "tracking",
        sa.Column("source", sa.String(256), primary_key=True),
        sa.Column("position", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    for table in ("tracking", "snapshots", "dead_letters", "outbox", "log", "meta"):
        op.drop_table(table)
