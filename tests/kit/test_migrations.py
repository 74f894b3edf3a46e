"""The migrations build the schema the models describe, on the suite's backend: a column
added to a model without its migration (or a migration without its model) fails here, not
at an operator's upgrade."""

from __future__ import annotations

from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, Float
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.types import TypeEngine

from voice_service.core.models import Base
from voice_service.kit.db import migrate

pytestmark = pytest.mark.anyio


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": _type_differs})
    return list(compare_metadata(context, Base.metadata))


def _type_differs(
    _context: object,
    _inspected: object,
    _column: object,
    inspected_type: TypeEngine[Any],
    metadata_type: TypeEngine[Any],
) -> bool | None:
    """Alembic's own comparison (None), but SQLite reflects a DOUBLE column as FLOAT: both
    are its one floating-point storage class."""
    if isinstance(inspected_type, Float) and isinstance(metadata_type, Float):
        return False
    return None


async def test_the_migrated_schema_is_the_models(own_database: str) -> None:
    engine = create_async_engine(own_database)
    try:
        await migrate(engine)
        async with engine.connect() as connection:
            differences = await connection.run_sync(_differences)
    finally:
        await engine.dispose()
    assert differences == [], differences
