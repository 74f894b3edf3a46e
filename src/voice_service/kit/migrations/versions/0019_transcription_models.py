"""request_log.model: the transcription model (or provider) that served a request;
transcription_jobs.model: the model a job asked for

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("request_log", sa.Column("model", sa.String(length=64), nullable=True))
    op.add_column("transcription_jobs", sa.Column("model", sa.String(length=64), nullable=True))


def downgrade() -> None:
    op.drop_column("transcription_jobs", "model")
    op.drop_column("request_log", "model")
