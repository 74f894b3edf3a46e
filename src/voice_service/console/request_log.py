"""The request log page: newest first, filtered, paginated; one request by its id."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Request, Response

from voice_service.books.requestlog.pages import ENDPOINTS, STATUS_CLASSES, BilledRequest, LogQuery
from voice_service.books.requestlog.service import find_logged_request, request_log_page
from voice_service.console.auth import CurrentOrg, SignedInUser
from voice_service.console.pages import render
from voice_service.web.deps import Context

router = APIRouter()

PAGE_SIZE = 50


@router.get("/orgs/{org_id}/requests")
async def requests_page(
    request: Request,
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    status: str = "",
    endpoint: str = "",
    request_id: str = "",
    before: str | None = None,
) -> Response:
    # Unknown filter values are ignored rather than refused: they come from our own form.
    status_class = status if status in STATUS_CLASSES else None
    endpoint_name = endpoint if endpoint in ENDPOINTS else None
    request_id = request_id.strip()
    rows: Sequence[BilledRequest] = []
    next_id: str | None = None
    error: str | None = None
    if request_id:
        found = await find_logged_request(context.sessions, org.id, request_id)
        rows = [found] if found is not None else []
    else:
        asked = LogQuery(PAGE_SIZE, before, status_class, endpoint_name)
        page = await request_log_page(context.sessions, org.id, asked, restart=True)
        rows, next_id = page.requests, page.next
        if page.restarted:
            error = "That page no longer exists; showing the newest requests."
    return render(
        request,
        "requests.html",
        user=user,
        org=org,
        rows=rows,
        next_id=next_id,
        error=error,
        status_class=status_class or "",
        endpoint=endpoint_name or "",
        request_id=request_id,
        paged=before is not None,
        status_classes=STATUS_CLASSES,
        endpoints=ENDPOINTS,
    )
