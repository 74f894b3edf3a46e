"""The usage page (chart, table, totals) and its CSV download."""

from __future__ import annotations

import csv
import io
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from voice_service.books.usage.period import InvalidPeriod, parse_day, usage_period
from voice_service.books.usage.repository import (
    DailyUsage,
    GroupUsage,
    daily_usage,
    group_totals,
    totals,
    usage_by_key,
    usage_by_voice,
)
from voice_service.console.auth import CurrentOrg, SignedInUser
from voice_service.console.chart import endpoint_colours, endpoint_order, usage_chart
from voice_service.console.pages import render
from voice_service.console.security import secure_headers
from voice_service.web.deps import Context

router = APIRouter()

From = Annotated[str | None, Query(alias="from")]
To = Annotated[str | None, Query(alias="to")]
GroupBy = Annotated[str, Query()]
GROUPINGS: dict[str, str] = {"endpoint": "Endpoint", "key": "API key", "voice": "Voice"}


def _period(start: str | None, end: str | None) -> tuple[date, date, str | None]:
    """The chosen period, or the default one and why the choice was not taken."""
    try:
        first, last = usage_period(parse_day(start), parse_day(end))
    except InvalidPeriod as exc:
        return *usage_period(None, None), f"{exc} Showing the last 30 days."
    return first, last, None


async def _rows(context: Context, org_id: str, first: date, last: date) -> list[DailyUsage]:
    async with context.sessions() as session:
        return await daily_usage(session, org_id, first, last)


async def _groups(
    context: Context, org_id: str, first: date, last: date, group_by: str
) -> list[GroupUsage]:
    async with context.sessions() as session:
        if group_by == "key":
            return await usage_by_key(session, org_id, first, last)
        return await usage_by_voice(session, org_id, first, last)


def _grouping(value: str) -> str:
    return value if value in GROUPINGS else "endpoint"


def _label(group: GroupUsage, grouping: str) -> str:
    """A key as its name and prefix; a voice as its name (its id, if it has none)."""
    if grouping == "key":
        prefix = f"{group.label}…"
        return prefix if group.name is None else f"{group.name} ({prefix})"
    return group.label or group.id


def _in_order(rows: list[DailyUsage], *, newest_first: bool) -> list[DailyUsage]:
    """By day, and within a day in the vocabulary's order (as the totals and the chart)."""
    order = endpoint_order(row.endpoint for row in rows)
    direction = -1 if newest_first else 1
    return sorted(rows, key=lambda r: (direction * r.day.toordinal(), order.index(r.endpoint)))


@router.get("/orgs/{org_id}/usage")
async def usage_page(
    request: Request,
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    start: From = None,
    end: To = None,
    group_by: GroupBy = "endpoint",
) -> Response:
    first, last, error = _period(start, end)
    rows = await _rows(context, org.id, first, last)
    summed = totals(rows)
    grouping = _grouping(group_by)
    groups = [] if grouping == "endpoint" else await _groups(context, org.id, first, last, grouping)
    labels = {group.id: _label(group, grouping) for group in groups}
    return render(
        request,
        "usage.html",
        user=user,
        org=org,
        status=400 if error else 200,
        error=error,
        start=first,
        end=last,
        rows=_in_order(rows, newest_first=True),
        totals=[(endpoint, summed[endpoint]) for endpoint in endpoint_order(summed)],
        colours=endpoint_colours([row.endpoint for row in rows]),
        chart=usage_chart(rows, first, last),
        group_by=grouping,
        groupings=GROUPINGS,
        groups=sorted(groups, key=lambda g: (-g.day.toordinal(), labels[g.id])),
        group_totals=sorted(group_totals(groups).items(), key=lambda item: -item[1]),
        labels=labels,
    )


@router.get("/orgs/{org_id}/usage.csv")
async def usage_csv(
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    start: From = None,
    end: To = None,
    group_by: GroupBy = "endpoint",
) -> Response:
    first, last, error = _period(start, end)
    if error is not None:
        return secure_headers(Response(error, status_code=400, media_type="text/plain"))
    grouping = _grouping(group_by)
    out = io.StringIO()
    writer = csv.writer(out)
    if grouping == "endpoint":
        writer.writerow(["date", "endpoint", "units", "requests"])
        for row in _in_order(await _rows(context, org.id, first, last), newest_first=False):
            writer.writerow([row.day.isoformat(), row.endpoint, row.units, row.requests])
    else:
        groups = await _groups(context, org.id, first, last, grouping)
        if grouping == "key":
            writer.writerow(["date", "key_id", "key_prefix", "key_name", "units", "requests"])
        else:
            writer.writerow(["date", "voice_id", "voice_name", "units", "requests"])
        for g in groups:
            named = [g.label, g.name] if grouping == "key" else [g.label]
            writer.writerow([g.day.isoformat(), g.id, *named, g.units, g.requests])
    suffix = "" if grouping == "endpoint" else f"-by-{grouping}"
    filename = f"usage-{org.id}-{first.isoformat()}-{last.isoformat()}{suffix}.csv"
    response = Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
    return secure_headers(response)
