"""tenancy_version: the counter that tells every node its cached tenancy is stale

Nodes cache resolved API keys and organizations' clone listings. Every change that would
make a cached entry wrong bumps this one row in the change's own transaction; each node
polls it and drops its caches when it moves. A counter in the database cannot be missed the
way a message can, and the CLI's changes move it as well as the nodes'.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 12:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "tenancy_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(table, [{"id": 1, "version": 0}])


def downgrade() -> None:
    op.drop_table("tenancy_version")
