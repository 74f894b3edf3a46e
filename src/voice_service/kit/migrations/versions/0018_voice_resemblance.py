"""voices.resemblance: how much a clone sounds like its sample (null: not measured)

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("voices", sa.Column("resemblance", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("voices", "resemblance")
