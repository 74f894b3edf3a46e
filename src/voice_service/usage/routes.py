"""GET /usage: the caller's organization's billed units per day and endpoint, key or voice."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from voice_service.deps import Context, UsageReader
from voice_service.errors import InvalidRequest
from voice_service.schemas import error_responses
from voice_service.usage.period import DAY_PATTERN, InvalidPeriod, parse_day, usage_period
from voice_service.usage.repository import (
    daily_usage,
    group_totals,
    totals,
    usage_by_key,
    usage_by_voice,
)
from voice_service.usage.schemas import (
    DailyUsageRow,
    KeyRef,
    KeyUsageRow,
    UsageReport,
    VoiceRef,
    VoiceUsageRow,
)

router = APIRouter(tags=["usage"])


@router.get(
    "/usage",
    summary="Billed units per day and endpoint, key or voice for the caller's organization",
    response_model=UsageReport,
    responses=error_responses(400),
)
async def get_usage(
    context: Context,
    principal: UsageReader,
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
    group_by: Annotated[
        Literal["endpoint", "key", "voice"],
        Query(
            description="Rows per endpoint, per key (its prefix and name) or per voice (its "
            "id and name; what voices made: speech and clones)."
        ),
    ] = "endpoint",
) -> UsageReport:
    try:
        first, last = usage_period(parse_day(start), parse_day(end))
    except InvalidPeriod as exc:
        raise InvalidRequest(f"from, to: {exc}") from None
    async with context.sessions() as session:
        if group_by == "key":
            groups = await usage_by_key(session, principal.org_id, first, last)
            return UsageReport(
                usage=[
                    KeyUsageRow(
                        date=g.day,
                        key=KeyRef(id=g.id, prefix=g.label or "", name=g.name),
                        units=g.units,
                        requests=g.requests,
                    )
                    for g in groups
                ],
                totals=group_totals(groups),
            )
        if group_by == "voice":
            groups = await usage_by_voice(session, principal.org_id, first, last)
            return UsageReport(
                usage=[
                    VoiceUsageRow(
                        date=g.day,
                        voice=VoiceRef(id=g.id, name=g.label),
                        units=g.units,
                        requests=g.requests,
                    )
                    for g in groups
                ],
                totals=group_totals(groups),
            )
        rows = await daily_usage(session, principal.org_id, first, last)
    return UsageReport(
        usage=[
            DailyUsageRow(date=r.day, endpoint=r.endpoint, units=r.units, requests=r.requests)
            for r in rows
        ],
        totals=totals(rows),
    )
