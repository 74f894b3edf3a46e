"""transcription_jobs.webhook_url, webhook_signing_secrets, deliveries to a job's own URL

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.add_column("transcription_jobs", sa.Column("webhook_url", sa.String(2048), nullable=True))
    op.create_table(
        "webhook_signing_secrets",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("secret", sa.String(length=100), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("previous", sa.String(length=100), nullable=True),
        sa.Column("previous_until", _UTC, nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.PrimaryKeyConstraint("org_id"),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.alter_column("webhook_id", existing_type=sa.String(length=40), nullable=True)
        batch_op.add_column(sa.Column("url", sa.String(length=2048), nullable=True))
        batch_op.add_column(sa.Column("job_id", sa.String(length=40), nullable=True))
        batch_op.create_index("ix_webhook_deliveries_job", ["job_id"])


def downgrade() -> None:
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_webhook_deliveries_job")
        batch_op.drop_column("job_id")
        batch_op.drop_column("url")
    op.execute("DELETE FROM webhook_deliveries WHERE webhook_id IS NULL")
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.alter_column("webhook_id", existing_type=sa.String(length=40), nullable=False)
    op.drop_table("webhook_signing_secrets")
    op.drop_column("transcription_jobs", "webhook_url")
