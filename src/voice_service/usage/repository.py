"""Usage records: the billable units of successful requests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Date, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from voice_service.auth.principal import Principal
from voice_service.models import UsageRecord


def record_usage(
    session: AsyncSession,
    principal: Principal,
    request_id: str,
    endpoint: str,
    units: int,
    voice_id: str | None,
) -> None:
    """Add the record to the caller's transaction: it commits with the success or not at all."""
    session.add(
        UsageRecord(
            request_id=request_id,
            org_id=principal.org_id,
            key_id=principal.key_id,
            endpoint=endpoint,
            units=units,
            voice_id=voice_id,
        )
    )


@dataclass(frozen=True, slots=True)
class DailyUsage:
    day: date
    endpoint: str
    units: int
    requests: int


async def daily_usage(
    session: AsyncSession, org_id: str, start: date, end: date
) -> list[DailyUsage]:
    """Units and requests per UTC day and endpoint, `start` to `end` inclusive."""
    day = _utc_day(session, UsageRecord.created_at)
    within = [UsageRecord.org_id == org_id, UsageRecord.created_at >= _midnight(start)]
    # The end bound is the next midnight; the calendar's last day has none, nor needs one.
    if end < date.max:
        within.append(UsageRecord.created_at < _midnight(end + timedelta(days=1)))
    rows = await session.execute(
        select(day, UsageRecord.endpoint, func.sum(UsageRecord.units), func.count())
        .where(*within)
        .group_by(day, UsageRecord.endpoint)
        .order_by(day, UsageRecord.endpoint)
    )
    return [
        DailyUsage(
            day=value if isinstance(value, date) else date.fromisoformat(value),
            endpoint=endpoint,
            units=int(units),
            requests=int(requests),
        )
        for value, endpoint, units, requests in rows
    ]


def totals(rows: Sequence[DailyUsage]) -> dict[str, int]:
    """Units per endpoint over `rows`."""
    summed: dict[str, int] = {}
    for row in rows:
        summed[row.endpoint] = summed.get(row.endpoint, 0) + row.units
    return dict(sorted(summed.items()))


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _utc_day(session: AsyncSession, column: InstrumentedAttribute[datetime]) -> ColumnElement[Any]:
    if session.get_bind().dialect.name == "postgresql":
        return cast(func.timezone("UTC", column), Date)
    # SQLite keeps UTC datetimes as "YYYY-MM-DD HH:MM:SS.ffffff" text.
    return func.substr(column, 1, 10)
