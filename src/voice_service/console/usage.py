"""The usage page (chart, table, totals) and its CSV download."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from voice_service.books.usage.period import InvalidPeriod, parse_period
from voice_service.books.usage.report import (
    Breakdown,
    EndpointUsage,
    GroupedUsage,
    Grouping,
    usage_overview,
    usage_report,
)
from voice_service.books.usage.tallies import DailyUsage, GroupUsage
from voice_service.console.auth import CurrentOrg, SignedInUser
from voice_service.console.chart import endpoint_colours, endpoint_order, usage_chart
from voice_service.console.pages import render
from voice_service.console.security import secure_headers
from voice_service.web.deps import Context

router = APIRouter()

GROUPINGS: dict[Grouping, str] = {"endpoint": "Endpoint", "key": "API key", "voice": "Voice"}


@dataclass(frozen=True, slots=True)
class Shown:
    """The period and grouping shown, and why the period chosen was not taken, if it was not."""

    first: date
    last: date
    grouping: Grouping
    error: str | None


def shown(
    start: Annotated[str | None, Query(alias="from")] = None,
    end: Annotated[str | None, Query(alias="to")] = None,
    group_by: Annotated[str, Query()] = "endpoint",
) -> Shown:
    """The page's and the download's choice; a period it cannot take is the last 30 days."""
    grouping: Grouping = next((g for g in GROUPINGS if g == group_by), "endpoint")
    try:
        first, last = parse_period(start, end)
    except InvalidPeriod as exc:
        return Shown(*parse_period(None, None), grouping, f"{exc} Showing the last 30 days.")
    return Shown(first, last, grouping, None)


Choice = Annotated[Shown, Depends(shown)]


def _label(group: GroupUsage, grouping: Grouping) -> str:
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
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg, choice: Choice
) -> Response:
    usage = await usage_overview(
        context.sessions, org.id, choice.first, choice.last, choice.grouping
    )
    daily = usage.daily
    grouped = usage.grouped
    groups, group_totals = (grouped.groups, grouped.totals) if grouped else ([], {})
    labels = {group.id: _label(group, choice.grouping) for group in groups}
    return render(
        request,
        "usage.html",
        user=user,
        org=org,
        status=400 if choice.error else 200,
        error=choice.error,
        start=choice.first,
        end=choice.last,
        rows=_in_order(daily.rows, newest_first=True),
        totals=[(endpoint, daily.totals[endpoint]) for endpoint in endpoint_order(daily.totals)],
        colours=endpoint_colours([row.endpoint for row in daily.rows]),
        chart=usage_chart(daily.rows, choice.first, choice.last),
        group_by=choice.grouping,
        groupings=GROUPINGS,
        groups=sorted(groups, key=lambda g: (-g.day.toordinal(), labels[g.id])),
        group_totals=sorted(group_totals.items(), key=lambda item: -item[1]),
        labels=labels,
    )


@router.get("/orgs/{org_id}/usage.csv")
async def usage_csv(
    context: Context, user: SignedInUser, org: CurrentOrg, choice: Choice
) -> Response:
    if choice.error is not None:
        return secure_headers(Response(choice.error, status_code=400, media_type="text/plain"))
    breakdown = await usage_report(
        context.sessions, org.id, choice.first, choice.last, choice.grouping
    )
    out = io.StringIO()
    csv.writer(out).writerows(_table(breakdown))
    suffix = "" if choice.grouping == "endpoint" else f"-by-{choice.grouping}"
    filename = f"usage-{org.id}-{choice.first.isoformat()}-{choice.last.isoformat()}{suffix}.csv"
    response = Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
    return secure_headers(response)


def _table(breakdown: Breakdown) -> list[list[object]]:
    """The download's header and rows, oldest day first."""
    if isinstance(breakdown, EndpointUsage):
        return [
            ["date", "endpoint", "units", "requests"],
            *(
                [row.day.isoformat(), row.endpoint, row.units, row.requests]
                for row in _in_order(breakdown.rows, newest_first=False)
            ),
        ]
    assert isinstance(breakdown, GroupedUsage)  # the console asks for no pages of requests
    header: list[object]
    if breakdown.grouping == "key":
        header = ["date", "key_id", "key_prefix", "key_name", "units", "requests"]
    else:
        header = ["date", "voice_id", "voice_name", "units", "requests"]
    return [header, *(_group_row(g, breakdown.grouping) for g in breakdown.groups)]


def _group_row(g: GroupUsage, grouping: Grouping) -> list[object]:
    named = [g.label, g.name] if grouping == "key" else [g.label]
    return [g.day.isoformat(), g.id, *named, g.units, g.requests]
