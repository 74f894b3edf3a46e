"""GET /usage: the caller's organization's billed units per day and endpoint, key or voice,
or request by request."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from voice_service.api.usage_schemas import (
    DailyUsageRow,
    KeyRef,
    KeyUsageRow,
    RequestUsageRow,
    UsageReport,
    VoiceRef,
    VoiceUsageRow,
)
from voice_service.books.usage.period import DAY_PATTERN, InvalidPeriod, parse_day, usage_period
from voice_service.books.usage.repository import (
    UnknownRequest,
    daily_usage,
    group_totals,
    totals,
    usage_by_key,
    usage_by_request,
    usage_by_voice,
)
from voice_service.core.errors import InvalidRequest
from voice_service.web.deps import Context, UsageReader
from voice_service.web.schemas import error_responses

router = APIRouter(tags=["usage"])

PAGE = 1000  # billed requests per page of group_by=request, unless `limit` says
MAX_PAGE = 10_000


@router.get(
    "/usage",
    summary="Billed units per day and endpoint, key or voice for the caller's organization",
    response_model=UsageReport,
    # `next` is there for group_by=request only: the other groupings come whole.
    response_model_exclude_unset=True,
    responses=error_responses(400),
)
async def get_usage(
    context: Context,
    principal: UsageReader,
    start: Annotated[
        str | None,
        Query(
            alias="from",
            pattern=DAY_PATTERN,
            description="First day, YYYY-MM-DD (UTC).",
            openapi_examples={"november": {"value": "2026-11-01"}},
        ),
    ] = None,
    end: Annotated[
        str | None,
        Query(
            alias="to",
            pattern=DAY_PATTERN,
            description="Last day, YYYY-MM-DD (UTC); default today.",
            openapi_examples={"november": {"value": "2026-11-30"}},
        ),
    ] = None,
    group_by: Annotated[
        Literal["endpoint", "key", "voice", "request"],
        Query(
            description="Rows per day and endpoint, per key (its prefix and name) or per voice "
            "(its id and name; what voices made: speech and clones); or one row per billed "
            "request, oldest first, a page at a time (`limit`, `after`)."
        ),
    ] = "endpoint",
    limit: Annotated[
        int | None,
        Query(ge=1, le=MAX_PAGE, description="`group_by=request`: rows per page (1000)."),
    ] = None,
    after: Annotated[
        str | None,
        Query(
            max_length=40,
            description="`group_by=request`: a request id; the page starts after it.",
        ),
    ] = None,
) -> UsageReport:
    try:
        first, last = usage_period(parse_day(start), parse_day(end))
    except InvalidPeriod as exc:
        raise InvalidRequest(f"from, to: {exc}") from None
    if group_by != "request" and (limit is not None or after is not None):
        raise InvalidRequest("limit, after: only group_by=request comes in pages.")
    async with context.sessions() as session:
        if group_by == "request":
            try:
                page = await usage_by_request(
                    session, principal.org_id, first, last, limit=limit or PAGE, after=after
                )
            except UnknownRequest:
                raise InvalidRequest(
                    f"after: no billed request {after!r} of this organization in the period.",
                    param="after",
                ) from None
            whole = await daily_usage(session, principal.org_id, first, last)
            return UsageReport(
                usage=[
                    RequestUsageRow(
                        date=record.created_at.date(),
                        request_id=record.request_id,
                        created_at=record.created_at,
                        endpoint=record.endpoint,
                        units=record.units,
                        key_id=record.key_id,
                        voice_id=record.voice_id,
                    )
                    for record in page.records
                ],
                totals=totals(whole),
                next=page.next,
            )
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
