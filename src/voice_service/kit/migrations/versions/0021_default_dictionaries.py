"""pronunciation_dictionaries.default_since: when the organization made the dictionary one
of its defaults, which speech that names no dictionaries uses (Wyoming's, say)

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "pronunciation_dictionaries",
        sa.Column(
            "default_since",
            voice_service.core.models.UTCDateTime(timezone=True),
            nullable=True,
        ),
    )


def downgrade() -> None:
    op.drop_column("pronunciation_dictionaries", "default_since")
