"""The usage page (chart, table, totals) and its CSV download."""

from __future__ import annotations

import csv
import io
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from voice_service.console.auth import CurrentOrg, SignedInUser
from voice_service.console.chart import endpoint_colours, endpoint_order, usage_chart
from voice_service.console.pages import render
from voice_service.console.security import secure_headers
from voice_service.deps import Context
from voice_service.usage.period import InvalidPeriod, parse_day, usage_period
from voice_service.usage.repository import DailyUsage, daily_usage, totals

router = APIRouter()

From = Annotated[str | None, Query(alias="from")]
To = Annotated[str | None, Query(alias="to")]


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
) -> Response:
    first, last, error = _period(start, end)
    rows = await _rows(context, org.id, first, last)
    summed = totals(rows)
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
    )


@router.get("/orgs/{org_id}/usage.csv")
async def usage_csv(
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    start: From = None,
    end: To = None,
) -> Response:
    first, last, error = _period(start, end)
    if error is not None:
        return secure_headers(Response(error, status_code=400, media_type="text/plain"))
    rows = await _rows(context, org.id, first, last)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["date", "endpoint", "units", "requests"])
    for row in _in_order(rows, newest_first=False):
        writer.writerow([row.day.isoformat(), row.endpoint, row.units, row.requests])
    filename = f"usage-{org.id}-{first.isoformat()}-{last.isoformat()}.csv"
    response = Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
    return secure_headers(response)
