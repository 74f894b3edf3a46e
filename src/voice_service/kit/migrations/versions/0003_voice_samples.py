"""voice_samples: clone samples in the database, where every node reaches them

Samples were files under DATA_DIR/samples/<org>/<voice> on the node that made the clone, so
a delete through another node left them behind. A migration cannot read a node's files:
`voices.sample_path` is simply dropped, and the files of clones made before it stay under
DATA_DIR/samples for the operator to archive or remove.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Batch mode: SQLite drops a column by copying the table (a plain ALTER elsewhere).
    # Before the new table exists, so the copy never meets a foreign key pointing at it.
    with op.batch_alter_table("voices", schema=None) as batch_op:
        batch_op.drop_column("sample_path")
    op.create_table(
        "voice_samples",
        sa.Column("voice_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column(
            "created_at", voice_service.core.models.UTCDateTime(timezone=True), nullable=False
        ),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.ForeignKeyConstraint(["voice_id"], ["voices.id"]),
        sa.PrimaryKeyConstraint("voice_id"),
    )


def downgrade() -> None:
    op.drop_table("voice_samples")
    with op.batch_alter_table("voices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sample_path", sa.Text(), nullable=True))
