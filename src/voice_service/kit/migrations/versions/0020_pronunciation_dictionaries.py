"""pronunciation_dictionaries, pronunciation_dictionary_versions

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_UTC = voice_service.core.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pronunciation_dictionaries",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.String(length=1000), nullable=True),
        sa.Column("language", sa.String(length=35), nullable=True),
        sa.Column("latest_version_id", sa.String(length=40), nullable=False),
        sa.Column("latest_rules", sa.Integer(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("archived_at", _UTC, nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_pronunciation_dictionaries_org",
        "pronunciation_dictionaries",
        ["org_id", "created_at"],
    )
    op.create_table(
        "pronunciation_dictionary_versions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("dictionary_id", sa.String(length=40), nullable=False),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["dictionary_id"], ["pronunciation_dictionaries.id"], ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_pronunciation_dictionary_versions_dictionary_id"),
        "pronunciation_dictionary_versions",
        ["dictionary_id"],
    )


def downgrade() -> None:
    op.drop_table("pronunciation_dictionary_versions")
    op.drop_index("ix_pronunciation_dictionaries_org", table_name="pronunciation_dictionaries")
    op.drop_table("pronunciation_dictionaries")
