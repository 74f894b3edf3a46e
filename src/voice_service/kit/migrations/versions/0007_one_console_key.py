"""one_console_key: at most one un-revoked console key per organization

The console made its organization's key with a select and an insert, so parallel "Try it"
requests in a new organization each made one. A unique partial index makes the database
the one owner of the rule (both SQLite and PostgreSQL have partial indexes); the console's
get-or-create inserts and, on a unique violation, reads the winner's key.

Existing duplicates are revoked, not deleted: usage records hold a foreign key to their
key and request-log rows name it, so deleting would break billing history or leave log
rows pointing nowhere. The oldest key of each organization stays the console key.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 12:00:00
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

import voice_service.core.models

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

INDEX = "ux_api_keys_one_console_key"
_LIVE_CONSOLE_KEY = "kind = 'console' AND revoked_at IS NULL"

_api_keys = sa.table(
    "api_keys",
    sa.column("id", sa.String()),
    sa.column("org_id", sa.String()),
    sa.column("kind", sa.String()),
    sa.column("created_at", voice_service.core.models.UTCDateTime(timezone=True)),
    sa.column("revoked_at", voice_service.core.models.UTCDateTime(timezone=True)),
)
_tenancy_version = sa.table("tenancy_version", sa.column("id"), sa.column("version"))


def upgrade() -> None:
    if _revoke_duplicates():
        # Nodes cache resolved keys; a revoked key must stop working on every node.
        op.execute(
            sa.update(_tenancy_version)
            .where(_tenancy_version.c.id == 1)
            .values(version=_tenancy_version.c.version + 1)
        )
    op.create_index(
        INDEX,
        "api_keys",
        ["org_id"],
        unique=True,
        sqlite_where=sa.text(_LIVE_CONSOLE_KEY),
        postgresql_where=sa.text(_LIVE_CONSOLE_KEY),
    )


def _revoke_duplicates() -> int:
    """Revoke every live console key but each organization's oldest; how many were."""
    rows = op.get_bind().execute(
        sa.select(_api_keys.c.id, _api_keys.c.org_id)
        .where(_api_keys.c.kind == "console", _api_keys.c.revoked_at.is_(None))
        .order_by(_api_keys.c.org_id, _api_keys.c.created_at, _api_keys.c.id)
    )
    extra = [
        key_id
        for _, keys in itertools.groupby(rows, key=lambda row: row.org_id)
        for key_id, _org in list(keys)[1:]
    ]
    if extra:
        op.execute(
            sa.update(_api_keys)
            .where(_api_keys.c.id.in_(extra))
            .values(revoked_at=datetime.now(UTC))
        )
    return len(extra)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="api_keys")
