"""GET /usage: the caller's organization's billed units per day and endpoint, key or voice,
or request by request."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from voice_service.api.usage_schemas import UsageReport
from voice_service.books.usage.period import DAY_PATTERN, InvalidPeriod, parse_period
from voice_service.books.usage.report import MAX_PAGE, usage_report
from voice_service.core.errors import InvalidRequest
from voice_service.web.deps import Context, UsageReader
from voice_service.web.schemas import error_responses

router = APIRouter(tags=["usage"])


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
        first, last = parse_period(start, end)
    except InvalidPeriod as exc:
        raise InvalidRequest(f"from, to: {exc}") from None
    breakdown = await usage_report(
        context.sessions, principal.org_id, first, last, group_by, limit=limit, after=after
    )
    return UsageReport.of(breakdown)
