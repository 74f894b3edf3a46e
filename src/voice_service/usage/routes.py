"""GET /usage: the caller's organization's billed units per day and endpoint."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from voice_service.deps import Authenticated, Context
from voice_service.errors import InvalidRequest
from voice_service.schemas import error_responses
from voice_service.usage.period import DAY_PATTERN, InvalidPeriod, parse_day, usage_period
from voice_service.usage.repository import daily_usage, totals
from voice_service.usage.schemas import DailyUsageRow, UsageReport

router = APIRouter(tags=["usage"])


@router.get(
    "/usage",
    summary="Billed units per day and endpoint for the caller's organization",
    response_model=UsageReport,
    responses=error_responses(400),
)
async def get_usage(
    context: Context,
    principal: Authenticated,
    start: Annotated[
        str | None,
        Query(alias="from", pattern=DAY_PATTERN, description="First day, YYYY-MM-DD (UTC)."),
    ] = None,
    end: Annotated[
        str | None,
        Query(
            alias="to",
            pattern=DAY_PATTERN,
            description="Last day, YYYY-MM-DD (UTC); default today.",
        ),
    ] = None,
) -> UsageReport:
    try:
        first, last = usage_period(parse_day(start), parse_day(end))
    except InvalidPeriod as exc:
        raise InvalidRequest(f"from, to: {exc}") from None
    async with context.sessions() as session:
        rows = await daily_usage(session, principal.org_id, first, last)
    return UsageReport(
        usage=[
            DailyUsageRow(date=r.day, endpoint=r.endpoint, units=r.units, requests=r.requests)
            for r in rows
        ],
        totals=totals(rows),
    )
