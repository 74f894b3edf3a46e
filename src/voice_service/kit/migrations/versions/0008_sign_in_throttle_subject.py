"""sign_in_throttle keyed by subject: the account an email finds, or the unknown email

The throttle was keyed by the email as typed (cut to 320 characters before the lookup
normalized it again), so padding an address gave it a fresh row while it still signed the
account in. Rows are now keyed by what the lookup found: `user:<id>` for an account,
`email:<address>` for an address no account has. The table only holds the last day's
failures, so it is made anew rather than converted: a throttle in progress starts afresh.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def _create(key: str, width: int) -> None:
    op.create_table(
        "sign_in_throttle",
        sa.Column(key, sa.String(length=width), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("retry_at", _UTC, nullable=True),
        sa.Column("last_failed_at", _UTC, nullable=False),
        sa.PrimaryKeyConstraint(key),
    )
    op.create_index("ix_sign_in_throttle_last_failed_at", "sign_in_throttle", ["last_failed_at"])


def _drop() -> None:
    op.drop_index("ix_sign_in_throttle_last_failed_at", table_name="sign_in_throttle")
    op.drop_table("sign_in_throttle")


def upgrade() -> None:
    _drop()
    _create("subject", 330)


def downgrade() -> None:
    _drop()
    _create("email", 320)
