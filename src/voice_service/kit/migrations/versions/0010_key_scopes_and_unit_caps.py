"""API key scopes and monthly unit caps

- api_keys.scopes: what a key may do (a JSON list of scope names); null, as for every key
  made before, lets it do everything.
- api_keys.monthly_units, organizations.monthly_units: billed units allowed per UTC
  calendar month; null: no cap.
- unit_holds: the units requests in flight were allowed against a cap, so that concurrent
  requests (on any node) cannot both pass the last units.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 21:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("scopes", sa.JSON(), nullable=True))
    op.add_column("api_keys", sa.Column("monthly_units", sa.Integer(), nullable=True))
    op.add_column("organizations", sa.Column("monthly_units", sa.Integer(), nullable=True))
    op.create_table(
        "unit_holds",
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.ForeignKeyConstraint(["key_id"], ["api_keys.id"]),
        sa.PrimaryKeyConstraint("request_id"),
    )
    op.create_index("ix_unit_holds_org_created", "unit_holds", ["org_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_unit_holds_org_created", table_name="unit_holds")
    op.drop_table("unit_holds")
    with op.batch_alter_table("organizations", schema=None) as batch_op:
        batch_op.drop_column("monthly_units")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("monthly_units")
        batch_op.drop_column("scopes")
