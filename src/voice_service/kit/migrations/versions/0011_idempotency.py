"""idempotency_keys, and request_log.replayed

- idempotency_keys: each `Idempotency-Key` an organization used in the last 24 hours, the
  request it named, and once done the answer sent again to a retry.
- request_log.replayed: the row of a retry answered with a stored answer (never billed).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.add_column(
        "request_log",
        sa.Column("replayed", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("done", sa.Boolean(), nullable=False),
        sa.Column("lease_until", _UTC, nullable=False),
        sa.Column("billed", sa.Boolean(), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("error_code", sa.String(length=40), nullable=True),
        sa.Column("content_type", sa.String(length=200), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("body_in_store", sa.Boolean(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.PrimaryKeyConstraint("org_id", "key"),
    )
    op.create_index("ix_idempotency_keys_expires", "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_expires", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
    with op.batch_alter_table("request_log", schema=None) as batch_op:
        batch_op.drop_column("replayed")
