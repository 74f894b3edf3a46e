"""Alembic environment: runs on the connection `voice_service.kit.db.migrate` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from voice_service.core.models import Base

connection: Connection | None = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("Run migrations through voice_service.kit.db.migrate (voice-service serve).")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
