"""Event ids known for ever (issue 38): the ids of the events of a segment that left the live
log are kept in `retired_ids`, as a 64-bit hash each with its position, so that an event sent
again after retention is still a duplicate. The meta key `ids_retired_through` says up to
which position every archived id is kept (segments dropped before this revision are read back
from the archive by the daemon).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retired_ids",
        sa.Column("id_hash", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id_hash"),
        sqlite_with_rowid=False,  # the key is the row: about half the bytes
    )


def downgrade() -> None:
    op.drop_table("retired_ids")
