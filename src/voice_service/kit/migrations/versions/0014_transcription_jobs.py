"""transcription_jobs, blob_chunks; unit_holds.lasts_until; request_log.resource_id

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "blob_chunks",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.PrimaryKeyConstraint("name", "seq"),
    )
    op.create_table(
        "transcription_jobs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("endpoint", sa.String(length=40), nullable=False),
        sa.Column("language", sa.String(length=8), nullable=True),
        sa.Column("word_timestamps", sa.Boolean(), nullable=False),
        sa.Column("keep_audio", sa.Boolean(), nullable=False),
        sa.Column("audio", sa.String(length=200), nullable=True),
        sa.Column("audio_bytes", sa.BigInteger(), nullable=False),
        sa.Column("duration", sa.String(length=64), nullable=False),
        sa.Column("done_seconds", sa.Float(), nullable=False),
        sa.Column("units", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error_code", sa.String(length=40), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("started_at", _UTC, nullable=True),
        sa.Column("finished_at", _UTC, nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.ForeignKeyConstraint(["key_id"], ["api_keys.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("request_id"),
    )
    op.create_index(
        "ix_transcription_jobs_org_created", "transcription_jobs", ["org_id", "created_at"]
    )
    op.create_index("ix_transcription_jobs_finished", "transcription_jobs", ["finished_at"])
    op.add_column("unit_holds", sa.Column("lasts_until", _UTC, nullable=True))
    op.add_column("request_log", sa.Column("resource_id", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_log", schema=None) as batch_op:
        batch_op.drop_column("resource_id")
    with op.batch_alter_table("unit_holds", schema=None) as batch_op:
        batch_op.drop_column("lasts_until")
    op.drop_index("ix_transcription_jobs_finished", table_name="transcription_jobs")
    op.drop_index("ix_transcription_jobs_org_created", table_name="transcription_jobs")
    op.drop_table("transcription_jobs")
    op.drop_table("blob_chunks")
