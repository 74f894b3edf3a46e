"""console: users, their sessions, sign-in throttling, the audit log, console keys

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=16), server_default="api", nullable=False)
        )
    op.create_table(
        "users",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("password_hash", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("last_sign_in_at", _UTC, nullable=True),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("email"),
    )
    op.create_index("ix_users_account_id", "users", ["account_id"])
    op.create_table(
        "console_sessions",
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=40), nullable=False),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("token_hash"),
    )
    op.create_index("ix_console_sessions_user_id", "console_sessions", ["user_id"])
    op.create_table(
        "sign_in_throttle",
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("retry_at", _UTC, nullable=True),
        sa.Column("last_failed_at", _UTC, nullable=False),
        sa.PrimaryKeyConstraint("email"),
    )
    op.create_index("ix_sign_in_throttle_last_failed_at", "sign_in_throttle", ["last_failed_at"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("account_id", sa.String(length=40), nullable=True),
        sa.Column("user_id", sa.String(length=40), nullable=True),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("action", sa.String(length=40), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=True),
        sa.Column("ip", sa.String(length=64), nullable=True),
        sa.Column("created_at", _UTC, nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_account_created", "audit_log", ["account_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_audit_account_created", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_sign_in_throttle_last_failed_at", table_name="sign_in_throttle")
    op.drop_table("sign_in_throttle")
    op.drop_index("ix_console_sessions_user_id", table_name="console_sessions")
    op.drop_table("console_sessions")
    op.drop_index("ix_users_account_id", table_name="users")
    op.drop_table("users")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("kind")
