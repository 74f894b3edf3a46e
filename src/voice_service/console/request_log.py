"""The request log page: newest first, filtered, paginated; one request by its id."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Request, Response

from voice_service.books.requestlog.repository import (
    ENDPOINTS,
    STATUS_CLASSES,
    BilledRequest,
    find_request,
    page_requests,
)
from voice_service.console.auth import CurrentOrg, SignedInUser
from voice_service.console.pages import render
from voice_service.kit.paging import UnknownCursor
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
    async with context.sessions() as session:
        if request_id:
            found = await find_request(session, org.id, request_id)
            rows = [found] if found is not None else []
        else:
            try:
                page = await page_requests(
                    session,
                    org.id,
                    limit=PAGE_SIZE,
                    before=before,
                    status_class=status_class,
                    endpoint=endpoint_name,
                )
            except UnknownCursor:
                error = "That page no longer exists; showing the newest requests."
                page = await page_requests(
                    session,
                    org.id,
                    limit=PAGE_SIZE,
                    status_class=status_class,
                    endpoint=endpoint_name,
                )
            rows, next_id = page.requests, page.next
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
