"""usage_records.voice_id: the voice a billed success spoke with

Usage can then be broken down by voice (`GET /usage?group_by=voice`). Null for what no
voice spoke (transcriptions) and for rows billed before this revision.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 21:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("usage_records", sa.Column("voice_id", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("usage_records", schema=None) as batch_op:
        batch_op.drop_column("voice_id")
