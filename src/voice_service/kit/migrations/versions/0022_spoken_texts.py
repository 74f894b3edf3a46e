"""spoken_texts: the start and end of each speech request's text, kept for a while so that
ElevenLabs' previous_request_ids and next_request_ids can name it

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-29 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "spoken_texts",
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("head", sa.Text(), nullable=False),
        sa.Column("tail", sa.Text(), nullable=False),
        sa.Column(
            "created_at", voice_service.core.models.UTCDateTime(timezone=True), nullable=False
        ),
        sa.PrimaryKeyConstraint("request_id"),
    )
    op.create_index("ix_spoken_texts_org_created", "spoken_texts", ["org_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_spoken_texts_org_created", table_name="spoken_texts")
    op.drop_table("spoken_texts")
