"""The request log: one row per request, success or failure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.db import insert_if_absent
from voice_service.models import ApiKey, RequestLogEntry, utcnow

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


async def insert_entries(
    session: AsyncSession, entries: Sequence[LogEntry], used_keys: set[str]
) -> None:
    """Add log rows, and refresh `used_keys`' last_used_at where it is stale.

    A row whose request id is already there is skipped: a spool replayed again after a
    crash, or a commit that succeeded although its answer was lost, adds no duplicate."""
    await session.execute(
        insert_if_absent(session, RequestLogEntry), [asdict(entry) for entry in entries]
    )
    now = utcnow()
    if used_keys:
        await session.execute(
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


async def recent_requests(
    session: AsyncSession, org_id: str, limit: int
) -> Sequence[RequestLogEntry]:
    result = await session.scalars(
        select(RequestLogEntry)
        .where(RequestLogEntry.org_id == org_id)
        .order_by(RequestLogEntry.created_at.desc(), RequestLogEntry.request_id)
        .limit(limit)
    )
    return result.all()
