"""The log's tables, as SQLAlchemy Core describes them (the migrations make them): the ordered
log, the outbox of decisions to publish, dead letters, snapshots and their parts, the segments
retention archived, the ids of events that left the live log, the consumer's position, and a
few settings (`meta`)."""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["DEAD_LETTERS", "LOG", "META", "METADATA", "OUTBOX", "RETIRED_IDS", "SEGMENTS", "SNAPSHOTS", "SNAPSHOT_PARTS", "TRACKING"]

METADATA = sa.MetaData()
META = sa.Table("meta", METADATA, sa.Column("key", sa.String(64), primary_key=True), sa.Column("value", sa.Text))
LOG = sa.Table(
    "log",
    METADATA,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("event_id", sa.String(256)),
    sa.Column("type", sa.String(64)),
    sa.Column("partition", sa.String(64)),
    sa.Column("ts", sa.BigInteger),
    sa.Column("received", sa.BigInteger),
    sa.Column("stream_seq", sa.BigInteger),
    sa.Column("payload", sa.LargeBinary),
)
OUTBOX = sa.Table(
    "outbox",
    METADATA,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("decision_id", sa.String(256)),
    sa.Column("subject", sa.String(256)),
    sa.Column("published_at", sa.BigInteger),
    sa.Column("attempts", sa.Integer),
    sa.Column("passed_over_at", sa.BigInteger),
    sa.Column("problem", sa.Text),
)
DEAD_LETTERS = sa.Table(
    "dead_letters",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("received", sa.BigInteger),
    sa.Column("subject", sa.String(256)),
    sa.Column("stream_seq", sa.BigInteger),
    sa.Column("partition", sa.String(64)),
    sa.Column("event_type", sa.String(64)),
    sa.Column("event_id", sa.String(256)),
    sa.Column("reason", sa.Text),
    sa.Column("raw", sa.LargeBinary),
)
SNAPSHOTS = sa.Table(
    "snapshots",
    METADATA,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("created", sa.BigInteger),
    sa.Column("payload", sa.LargeBinary),
    sa.Column("boundary", sa.Boolean, server_default=sa.false()),  # closes a segment: kept until that segment is archived
)
SEGMENTS = sa.Table(
    "segments",
    METADATA,
    sa.Column("first", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("last", sa.BigInteger),
    sa.Column("records", sa.BigInteger),
    sa.Column("bytes", sa.BigInteger),
    sa.Column("first_received", sa.BigInteger),
    sa.Column("last_received", sa.BigInteger),
    sa.Column("location", sa.Text),
    sa.Column("archived", sa.BigInteger),
    sa.Column("dropped", sa.BigInteger),
)
#: The ids of the events of segments that left the live log: a 64-bit hash each, with its
#: position. Two ids share a hash by a chance of n in 2**64 (n ids kept): nil at a billion.
RETIRED_IDS = sa.Table("retired_ids", METADATA, sa.Column("id_hash", sa.BigInteger, primary_key=True, autoincrement=False), sa.Column("seq", sa.BigInteger))
SNAPSHOT_PARTS = sa.Table(
    "snapshot_parts",
    METADATA,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("payload", sa.LargeBinary),
)
TRACKING = sa.Table(
    "tracking",
    METADATA,
    sa.Column("source", sa.String(256), primary_key=True),
    sa.Column("position", sa.BigInteger),
)
