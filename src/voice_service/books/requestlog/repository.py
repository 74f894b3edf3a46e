"""The request log: one row per request, success or failure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Dialect,
    Executable,
    Row,
    Select,
    Table,
    or_,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.books.requestlog.pages import BilledRequest, LogQuery
from voice_service.core.models import ApiKey, RequestLogEntry, UsageRecord, utcnow
from voice_service.kit.db import insert_if_absent
from voice_service.kit.paging import UnknownCursor, newest_first, page_of

# last_used_at is a hint for operators; refreshing it at most once a minute keeps it off
# the hot path's write volume.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class LogEntry:
    request_id: str
    org_id: str | None
    key_id: str | None
    method: str
    path: str
    status: int
    error_code: str | None
    duration_ms: int
    created_at: datetime = field(default_factory=utcnow)
    bytes_sent: int | None = None  # what a streamed response delivered
    replayed: bool = False  # an idempotent request's stored answer, sent again
    resource_id: str | None = None  # what the request made that outlives it (a job)
    model: str | None = None  # the transcription model that heard it, or "provider:NAME"


_ENTRY_FIELDS = tuple(field.name for field in fields(LogEntry))
_LOG_TABLE = cast(Table, RequestLogEntry.__table__)


async def insert_entries(
    session: AsyncSession, entries: Sequence[LogEntry], used_keys: set[str]
) -> None:
    """Add log rows, and refresh `used_keys`' last_used_at where it is stale.

    A row whose request id is already there is skipped: a spool replayed again after a
    crash, or a commit that succeeded although its answer was lost, adds no duplicate."""
    for statement, rows in _entry_statements(session.get_bind().dialect, entries, used_keys):
        await session.execute(statement, rows)


def insert_entries_blocking(
    connection: Connection, entries: Sequence[LogEntry], used_keys: set[str]
) -> None:
    """`insert_entries` on a synchronous connection (see db.SqliteWriteThread)."""
    for statement, rows in _entry_statements(connection.dialect, entries, used_keys):
        connection.execute(statement, rows)


def _entry_statements(
    dialect: Dialect, entries: Sequence[LogEntry], used_keys: set[str]
) -> list[tuple[Executable, list[dict[str, Any]] | None]]:
    # The table, not the mapped class: a Core executemany, without the ORM's bulk-insert
    # bookkeeping (about 5 % of a cached request's CPU went there).
    rows = [{name: getattr(entry, name) for name in _ENTRY_FIELDS} for entry in entries]
    statements: list[tuple[Executable, list[dict[str, Any]] | None]] = [
        (insert_if_absent(dialect, _LOG_TABLE), rows)
    ]
    if used_keys:
        now = utcnow()
        refresh = (
            update(ApiKey)
            .where(
                ApiKey.id.in_(used_keys),
                or_(
                    ApiKey.last_used_at.is_(None),
                    ApiKey.last_used_at < now - LAST_USED_RESOLUTION,
                ),
            )
            .values(last_used_at=now)
        )
        statements.append((refresh, None))
    return statements


@dataclass(frozen=True, slots=True)
class RequestPage:
    requests: Sequence[BilledRequest]
    next: str | None  # the last row's id when older rows exist


def _billed() -> Select[RequestLogEntry, int, str]:
    """Log rows with their usage row's units and endpoint, None where there is none (one at
    most: usage is keyed by request)."""
    return select(RequestLogEntry, UsageRecord.units, UsageRecord.endpoint).outerjoin(
        UsageRecord, UsageRecord.request_id == RequestLogEntry.request_id
    )


def _as_billed(row: Row[RequestLogEntry, int, str]) -> BilledRequest:
    entry, units, endpoint = row
    return BilledRequest(entry, units or 0, endpoint)


async def page_requests(session: AsyncSession, org_id: str, asked: LogQuery) -> RequestPage:
    """Newest first in one total order (created_at, then request_id, both descending); a
    page continues strictly after the row `before` names."""
    query = _billed().where(RequestLogEntry.org_id == org_id)
    after = None
    if asked.before is not None:
        found = await find_request(session, org_id, asked.before)
        if found is None:
            raise UnknownCursor(asked.before)
        after = (found.entry.created_at, found.entry.request_id)
    if asked.status_class is not None:
        hundreds = int(asked.status_class[0]) * 100
        query = query.where(RequestLogEntry.status.between(hundreds, hundreds + 99))
    if asked.endpoint is not None:
        query = query.where(RequestLogEntry.path.endswith("/" + asked.endpoint, autoescape=True))
    limit = asked.limit
    query = newest_first(
        query, RequestLogEntry.created_at, RequestLogEntry.request_id, after=after, limit=limit
    )
    rows, more = page_of([_as_billed(row) for row in await session.execute(query)], limit)
    return RequestPage(rows, rows[-1].entry.request_id if more else None)


async def find_request(session: AsyncSession, org_id: str, request_id: str) -> BilledRequest | None:
    row = (
        await session.execute(
            _billed().where(
                RequestLogEntry.request_id == request_id, RequestLogEntry.org_id == org_id
            )
        )
    ).one_or_none()
    return None if row is None else _as_billed(row)


async def recent_requests(
    session: AsyncSession, org_id: str, limit: int
) -> Sequence[BilledRequest]:
    return (await page_requests(session, org_id, LogQuery(limit))).requests
