"""What an organization used, and the requests it made."""

from __future__ import annotations

from collections import Counter
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any

import typer

from voice_service.cli.shared import (
    JsonFlag,
    OrgId,
    emit,
    refuse,
    run_work,
    shown,
)

# The books and tenancy (SQLAlchemy) are imported by the commands (cli/shared.py says why).
if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from voice_service.books.usage.report import EndpointUsage

# --- usage and request log ----------------------------------------------------------------


def usage(
    org_id: OrgId,
    start: Annotated[
        str | None,
        typer.Option(
            "--from", metavar="YYYY-MM-DD", help="First UTC day (default: 29 days before --to)."
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option("--to", metavar="YYYY-MM-DD", help="Last UTC day (default: today)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Billed units per UTC day and endpoint, and their totals, as GET /api/v1/usage
    answers (default: the 30 days ending --to; at most 366 days)."""
    from voice_service.books.usage.period import InvalidPeriod, parse_period
    from voice_service.books.usage.report import org_usage

    try:
        first, last = parse_period(start, end)
    except InvalidPeriod as exc:
        refuse(f"--from, --to: {exc}")

    usage = run_work(lambda session: org_usage(session, org_id, first, last))
    data = {
        "org_id": org_id,
        "from": first,
        "to": last,
        "usage": [
            {"date": r.day, "endpoint": r.endpoint, "units": r.units, "requests": r.requests}
            for r in usage.rows
        ],
        "totals": usage.totals,
    }
    emit(as_json, data, _usage_text(org_id, first, last, usage))


def _usage_text(org_id: str, first: date, last: date, usage: EndpointUsage) -> str:
    period = f"{org_id}, {first} to {last} (UTC days)"
    rows = usage.rows
    if not rows:
        return f"No usage for {period}."
    width = max(len(r.endpoint) for r in rows)
    lines = [f"Usage of {period}:"]
    lines += [
        f"{r.day}  {r.endpoint:<{width}}  {r.units:>10} units  {r.requests:>7} requests"
        for r in rows
    ]
    lines.append("Totals:")
    requests = Counter[str]()
    for r in rows:
        requests[r.endpoint] += r.requests
    lines += [
        f"{'':10}  {endpoint:<{width}}  {units:>10} units  {requests[endpoint]:>7} requests"
        for endpoint, units in usage.totals.items()
    ]
    return "\n".join(lines)


def requests(
    org_id: OrgId,
    limit: Annotated[int, typer.Option(min=1, help="Most recent N requests.")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """An organization's most recent requests, newest first."""
    from voice_service.books.requestlog.service import org_requests

    rows = [
        {
            "request_id": r.entry.request_id,
            "method": r.entry.method,
            "path": r.entry.path,
            "status": r.entry.status,
            "error_code": r.entry.error_code,
            "duration_ms": r.entry.duration_ms,
            "created_at": r.entry.created_at,
            "units": r.units,
            "billed_endpoint": r.endpoint,
        }
        for r in run_work(lambda session: org_requests(session, org_id, limit))
    ]
    lines = [
        f"{r['created_at']:%Y-%m-%d %H:%M:%S}  {r['request_id']}  {r['method']} {r['path']}  "
        f"{r['status']} {r['error_code'] or ''} {r['duration_ms']}ms  {r['units']} units"
        for r in rows
    ]
    emit(as_json, rows, "\n".join(lines) or "no requests")


def clones(org_id: OrgId, as_json: JsonFlag = False) -> None:
    """An organization's cloned voices, oldest first, with how much each sounds like its
    sample (resemblance, 0 to 1, by the node's own speaker encoder: low, fair or close)."""
    from voice_service.tenancy import service as tenancy
    from voice_service.voices.listing import organization_clones
    from voice_service.voices.schemas import Voice

    async def load(session: AsyncSession) -> list[dict[str, Any]]:
        await tenancy.require_org(session, org_id)
        # As the API shows them (GET /api/v1/voices).
        return [
            # Without the node's engines: what a clone speaks is the node's to say.
            Voice.of(voice).model_dump(mode="json", exclude={"languages"})
            for voice in await organization_clones(session, org_id)
        ]

    rows = run_work(load)
    emit(as_json, rows, _clones_text(org_id, rows))


def _clones_text(org_id: str, rows: list[dict[str, Any]]) -> str:
    from voice_service.voices.schemas import resemblance_word

    if not rows:
        return f"{org_id} has no cloned voices."
    lines = []
    for row in rows:
        likeness = row["resemblance"]
        heard = (
            "resemblance not measured"
            if likeness is None
            else f"resemblance {likeness:.2f} ({resemblance_word(likeness)})"
        )
        made = row["created_at"][:16].replace("T", " ")  # to the minute, in UTC
        lines.append(f"{made}  {row['id']}  {shown(row['name'])}  {heard}")
    return "\n".join(lines)
