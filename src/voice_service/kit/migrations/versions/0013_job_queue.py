"""queue_jobs, queue_workers: SAQ's job queue in the service's own database

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queue_jobs",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("queue", sa.String(length=100), nullable=False),
        sa.Column("job", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("scheduled", sa.BigInteger(), nullable=False),
        sa.Column("expire_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index(
        "ix_queue_jobs_dequeue", "queue_jobs", ["queue", "status", "priority", "scheduled"]
    )
    op.create_table(
        "queue_workers",
        sa.Column("worker_id", sa.String(length=100), nullable=False),
        sa.Column("queue_key", sa.String(length=100), nullable=True),
        sa.Column("stats", sa.JSON(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=True),
        sa.Column("expire_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("worker_id"),
    )


def downgrade() -> None:
    op.drop_table("queue_workers")
    op.drop_index("ix_queue_jobs_dequeue", table_name="queue_jobs")
    op.drop_table("queue_jobs")
