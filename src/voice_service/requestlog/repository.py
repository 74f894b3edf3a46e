"""The request log: one row per request, success or failure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.db import transaction
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


def log_writer(
    sessions: async_sessionmaker[AsyncSession],
) -> Callable[[LogEntry], Awaitable[None]]:
    async def write(entry: LogEntry) -> None:
        now = utcnow()
        async with transaction(sessions) as session:
            session.add(RequestLogEntry(**asdict(entry), created_at=now))
            if entry.key_id is not None:
                await session.execute(
                    update(ApiKey)
                    .where(
                        ApiKey.id == entry.key_id,
                        or_(
                            ApiKey.last_used_at.is_(None),
                            ApiKey.last_used_at < now - LAST_USED_RESOLUTION,
                        ),
                    )
                    .values(last_used_at=now)
                )

    return write


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
