"""The outbox remembers refused publishes: a decision NATS keeps refusing is passed over after a
bounded number of tries (it stays in the log), so it cannot hold up the decisions after it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as outbox:
        outbox.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        outbox.add_column(sa.Column("passed_over_at", sa.BigInteger(), nullable=True))
        outbox.add_column(sa.Column("problem", sa.Text(), nullable=True))
    op.drop_index("outbox_unpublished", "outbox")
    op.create_index("outbox_unpublished", "outbox", ["published_at", "passed_over_at", "seq"])


def downgrade() -> None:
    op.drop_index("outbox_unpublished", "outbox")
    op.create_index("outbox_unpublished", "outbox", ["published_at", "seq"])
    with op.batch_alter_table("outbox") as outbox:
        outbox.drop_column("problem")
        outbox.drop_column("passed_over_at")
        outbox.drop_column("attempts")
