"""The usage report: an organization's billed units over a period, per day and endpoint,
key or voice, or request by request. The API, the console and the CLI all read it here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.books.usage.repository import (
    UnknownRequest,
    daily_usage,
    usage_by_key,
    usage_by_request,
    usage_by_voice,
)
from voice_service.books.usage.tallies import DailyUsage, GroupUsage, group_totals, totals
from voice_service.core.errors import InvalidRequest
from voice_service.core.models import UsageRecord
from voice_service.tenancy.service import require_org

PAGE = 1000  # billed requests per page of group_by=request, unless `limit` says
MAX_PAGE = 10_000

Grouping = Literal["endpoint", "key", "voice"]
KeyOrVoice = Literal["key", "voice"]


@dataclass(frozen=True, slots=True)
class EndpointUsage:
    """Units and requests per day and endpoint, and units per endpoint."""

    rows: list[DailyUsage]
    totals: dict[str, int]


@dataclass(frozen=True, slots=True)
class GroupedUsage:
    """Units and requests per day and key or voice, and units per key or voice id."""

    grouping: KeyOrVoice
    groups: list[GroupUsage]
    totals: dict[str, int]


@dataclass(frozen=True, slots=True)
class RequestUsage:
    """A page of billed requests, oldest first, and units per endpoint over the period."""

    records: Sequence[UsageRecord]
    totals: dict[str, int]
    next: str | None  # the `after` of the next page; None on the last


Breakdown = EndpointUsage | GroupedUsage | RequestUsage


@dataclass(frozen=True, slots=True)
class UsageOverview:
    """Usage per day and endpoint, and per day and key or voice when grouped so."""

    daily: EndpointUsage
    grouped: GroupedUsage | None


async def endpoint_usage(
    session: AsyncSession, org_id: str, first: date, last: date
) -> EndpointUsage:
    """Units and requests per UTC day and endpoint, `first` to `last`, with their totals."""
    rows = await daily_usage(session, org_id, first, last)
    return EndpointUsage(rows, totals(rows))


async def grouped_usage(
    session: AsyncSession, org_id: str, first: date, last: date, grouping: KeyOrVoice
) -> GroupedUsage:
    """Units and requests per UTC day and key or voice, with their totals."""
    read = usage_by_key if grouping == "key" else usage_by_voice
    groups = await read(session, org_id, first, last)
    return GroupedUsage(grouping, groups, group_totals(groups))


async def request_usage(
    session: AsyncSession, org_id: str, first: date, last: date, *, limit: int, after: str | None
) -> RequestUsage:
    """A page of billed requests after `after`, with the whole period's endpoint totals."""
    try:
        page = await usage_by_request(session, org_id, first, last, limit=limit, after=after)
    except UnknownRequest:
        raise InvalidRequest(
            f"after: no billed request {after!r} of this organization in the period.",
            param="after",
        ) from None
    whole = await daily_usage(session, org_id, first, last)
    return RequestUsage(page.records, totals(whole), page.next)


async def usage_report(
    sessions: async_sessionmaker[AsyncSession],
    org_id: str,
    first: date,
    last: date,
    group_by: Grouping | Literal["request"] = "endpoint",
    *,
    limit: int | None = None,
    after: str | None = None,
) -> Breakdown:
    """The period's usage in one grouping (GET /usage, the console's CSV download)."""
    if group_by != "request" and (limit is not None or after is not None):
        raise InvalidRequest("limit, after: only group_by=request comes in pages.")
    async with sessions() as session:
        if group_by == "request":
            return await request_usage(
                session, org_id, first, last, limit=limit or PAGE, after=after
            )
        if group_by == "endpoint":
            return await endpoint_usage(session, org_id, first, last)
        return await grouped_usage(session, org_id, first, last, group_by)


async def usage_overview(
    sessions: async_sessionmaker[AsyncSession],
    org_id: str,
    first: date,
    last: date,
    grouping: Grouping,
) -> UsageOverview:
    """The period's usage per day and endpoint (the console's chart), and per key or voice."""
    async with sessions() as session:
        daily = await endpoint_usage(session, org_id, first, last)
        if grouping == "endpoint":
            return UsageOverview(daily, None)
        return UsageOverview(daily, await grouped_usage(session, org_id, first, last, grouping))


async def org_usage(session: AsyncSession, org_id: str, first: date, last: date) -> EndpointUsage:
    """`endpoint_usage` of an organization an operator names; UnknownId when there is none."""
    await require_org(session, org_id)
    return await endpoint_usage(session, org_id, first, last)
