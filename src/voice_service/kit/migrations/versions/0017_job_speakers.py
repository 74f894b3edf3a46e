"""transcription_jobs.speakers: a job diarized, with its speaker-count hints

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("transcription_jobs", sa.Column("speakers", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("transcription_jobs", "speakers")
