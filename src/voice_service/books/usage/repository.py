"""Usage records: the billable units of successful requests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Date, cast, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from voice_service.books.usage.charge import Charge
from voice_service.books.usage.tallies import DailyUsage, GroupUsage
from voice_service.core.models import ApiKey, UsageRecord, Voice
from voice_service.tenancy.principal import Principal


def record_usage(
    session: AsyncSession,
    principal: Principal,
    request_id: str,
    charge: Charge,
    now: datetime,
) -> None:
    """Add the record to the caller's transaction: it commits with the success or not at all."""
    add_usage(session, principal.org_id, principal.key_id, request_id, charge, now)


def add_usage(
    session: AsyncSession,
    org_id: str,
    key_id: str,
    request_id: str,
    charge: Charge,
    now: datetime,
) -> None:
    """`record_usage` for work settled after its request ended (a job), by whose it was."""
    session.add(
        UsageRecord(
            request_id=request_id,
            org_id=org_id,
            key_id=key_id,
            endpoint=charge.endpoint,
            units=charge.units,
            voice_id=charge.voice_id,
            created_at=now,
        )
    )


async def daily_usage(
    session: AsyncSession, org_id: str, start: date, end: date
) -> list[DailyUsage]:
    """Units and requests per UTC day and endpoint, `start` to `end` inclusive."""
    day = _utc_day(session, UsageRecord.created_at)
    within = _within(org_id, start, end)
    rows = await session.execute(
        select(day, UsageRecord.endpoint, func.sum(UsageRecord.units), func.count())
        .where(*within)
        .group_by(day, UsageRecord.endpoint)
        .order_by(day, UsageRecord.endpoint)
    )
    return [
        DailyUsage(
            day=_day(value),
            endpoint=endpoint,
            units=int(units),
            requests=int(requests),
        )
        for value, endpoint, units, requests in rows
    ]


async def usage_by_key(
    session: AsyncSession, org_id: str, start: date, end: date
) -> list[GroupUsage]:
    """Units and requests per UTC day and key, `start` to `end` inclusive."""
    day = _utc_day(session, UsageRecord.created_at)
    rows = await session.execute(
        select(
            day,
            UsageRecord.key_id,
            ApiKey.prefix,
            ApiKey.name,
            func.sum(UsageRecord.units),
            func.count(),
        )
        .join(ApiKey, ApiKey.id == UsageRecord.key_id)
        .where(*_within(org_id, start, end))
        .group_by(day, UsageRecord.key_id, ApiKey.prefix, ApiKey.name)
        .order_by(day, UsageRecord.key_id)
    )
    return [
        GroupUsage(_day(value), key_id, prefix, name, int(units), int(requests))
        for value, key_id, prefix, name, units, requests in rows
    ]


async def usage_by_voice(
    session: AsyncSession, org_id: str, start: date, end: date
) -> list[GroupUsage]:
    """Units and requests per UTC day and voice (what voices made: speech and clones)."""
    day = _utc_day(session, UsageRecord.created_at)
    voice_id = UsageRecord.voice_id
    rows = await session.execute(
        select(day, voice_id, Voice.name, func.sum(UsageRecord.units), func.count())
        .outerjoin(Voice, Voice.id == voice_id)
        .where(*_within(org_id, start, end), voice_id.is_not(None))
        .group_by(day, voice_id, Voice.name)
        .order_by(day, voice_id)
    )
    return [
        GroupUsage(_day(value), str(id_), name, None, int(units), int(requests))
        for value, id_, name, units, requests in rows
    ]


class UnknownRequest(LookupError):
    """`after` names no billed request of the organization in the period."""


@dataclass(frozen=True, slots=True)
class RequestPage:
    records: Sequence[UsageRecord]
    next: str | None  # the last record's request id when more follow


async def usage_by_request(
    session: AsyncSession,
    org_id: str,
    start: date,
    end: date,
    *,
    limit: int,
    after: str | None = None,
) -> RequestPage:
    """One record per billed request, oldest first in one total order (created_at, then
    request id), a page at a time: for export, and to check a bill request by request."""
    within = _within(org_id, start, end)
    query = select(UsageRecord).where(*within)
    if after is not None:
        cursor = await session.scalar(
            select(UsageRecord).where(*within, UsageRecord.request_id == after)
        )
        if cursor is None:
            raise UnknownRequest(after)
        query = query.where(
            tuple_(UsageRecord.created_at, UsageRecord.request_id)
            > tuple_(cursor.created_at, cursor.request_id)
        )
    order = (UsageRecord.created_at, UsageRecord.request_id)
    records = (await session.scalars(query.order_by(*order).limit(limit + 1))).all()
    more = len(records) > limit
    records = records[:limit]
    return RequestPage(records, records[-1].request_id if more else None)


def _within(org_id: str, start: date, end: date) -> list[ColumnElement[bool]]:
    within = [UsageRecord.org_id == org_id, UsageRecord.created_at >= _midnight(start)]
    # The end bound is the next midnight; the calendar's last day has none, nor needs one.
    if end < date.max:
        within.append(UsageRecord.created_at < _midnight(end + timedelta(days=1)))
    return within


def _day(value: date | str) -> date:
    return value if isinstance(value, date) else date.fromisoformat(value)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _utc_day(session: AsyncSession, column: InstrumentedAttribute[datetime]) -> ColumnElement[Any]:
    if session.get_bind().dialect.name == "postgresql":
        return cast(func.timezone("UTC", column), Date)
    # SQLite keeps UTC datetimes as "YYYY-MM-DD HH:MM:SS.ffffff" text.
    return func.substr(column, 1, 10)
