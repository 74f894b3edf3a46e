"""realtime_sessions: the realtime sessions open on any node, for the per-key limit

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "realtime_sessions",
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("lease_until", _UTC, nullable=False),
        sa.ForeignKeyConstraint(["key_id"], ["api_keys.id"]),
        sa.PrimaryKeyConstraint("request_id"),
    )
    op.create_index("ix_realtime_sessions_key", "realtime_sessions", ["key_id", "lease_until"])


def downgrade() -> None:
    op.drop_index("ix_realtime_sessions_key", table_name="realtime_sessions")
    op.drop_table("realtime_sessions")
