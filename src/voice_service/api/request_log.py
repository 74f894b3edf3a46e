"""GET /requests and GET /requests/{id}: the caller's organization's request log."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query

from voice_service.api.request_log_schemas import LoggedRequest, RequestList
from voice_service.books.requestlog.pages import LogQuery
from voice_service.books.requestlog.service import logged_request, request_log_page
from voice_service.web.deps import Context, UsageReader
from voice_service.web.schemas import EXAMPLE_REQUEST_ID, error_responses

router = APIRouter(tags=["requests"])


@router.get(
    "/requests",
    summary="The organization's request log, newest first",
    response_model=RequestList,
    responses=error_responses(400),
)
async def list_requests(
    context: Context,
    principal: UsageReader,
    limit: Annotated[
        int,
        Query(ge=1, le=200, description="Rows per page.", openapi_examples={"20": {"value": 20}}),
    ] = 50,
    before: Annotated[
        str | None,
        Query(max_length=40, description="A request id: the page starts after it."),
    ] = None,
    status: Annotated[
        Literal["2xx", "4xx", "5xx"] | None, Query(description="Status class.")
    ] = None,
) -> RequestList:
    asked = LogQuery(limit, before=before, status_class=status)
    page = await request_log_page(context.sessions, principal.org_id, asked)
    return RequestList(requests=[LoggedRequest.of(row) for row in page.requests], next=page.next)


@router.get(
    "/requests/{request_id}",
    summary="One request of the organization's log",
    response_model=LoggedRequest,
    responses=error_responses(404),
)
async def get_request(
    request_id: Annotated[str, Path(openapi_examples={"a request": {"value": EXAMPLE_REQUEST_ID}})],
    context: Context,
    principal: UsageReader,
) -> LoggedRequest:
    return LoggedRequest.of(await logged_request(context.sessions, principal.org_id, request_id))
