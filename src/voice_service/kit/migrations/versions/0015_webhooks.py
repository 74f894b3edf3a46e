"""webhooks, webhook_deliveries, webhook_attempts

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("secret", sa.String(length=100), nullable=False),
        sa.Column("description", sa.String(length=200), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_webhooks_org", "webhooks", ["org_id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("webhook_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("event", sa.String(length=60), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("delivered_at", _UTC, nullable=True),
        sa.ForeignKeyConstraint(["webhook_id"], ["webhooks.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_webhook_deliveries_hook_created", "webhook_deliveries", ["webhook_id", "created_at"]
    )
    op.create_table(
        "webhook_attempts",
        sa.Column("delivery_id", sa.String(length=40), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("at", _UTC, nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=False),
        sa.Column("error", sa.String(length=300), nullable=True),
        sa.ForeignKeyConstraint(["delivery_id"], ["webhook_deliveries.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("delivery_id", "number"),
    )


def downgrade() -> None:
    op.drop_table("webhook_attempts")
    op.drop_index("ix_webhook_deliveries_hook_created", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhooks_org", table_name="webhooks")
    op.drop_table("webhooks")
