"""request_log.bytes_sent: what a streamed response delivered

A stream's status is sent before its body is made, so a stream that broke off, or whose
client left, is told apart by its row: the outcome's status and error code, and the bytes
that reached the server before it ended. Null for responses that are not streamed.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("request_log", sa.Column("bytes_sent", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_log", schema=None) as batch_op:
        batch_op.drop_column("bytes_sent")
