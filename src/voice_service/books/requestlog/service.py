"""Reading the request log: an organization's requests a page at a time, newest first,
or one by its id. The API, the console and the CLI all read it here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.books.requestlog.pages import BilledRequest, LogQuery
from voice_service.books.requestlog.repository import (
    find_request,
    page_requests,
    recent_requests,
)
from voice_service.core.errors import InvalidRequest, NotFound
from voice_service.kit.paging import UnknownCursor
from voice_service.tenancy.service import require_org


@dataclass(frozen=True, slots=True)
class LogPage:
    requests: Sequence[BilledRequest]
    next: str | None  # the last row's id when older rows exist
    restarted: bool = False  # `before` named no request: the newest page came instead


async def request_log_page(
    sessions: async_sessionmaker[AsyncSession],
    org_id: str,
    asked: LogQuery,
    *,
    restart: bool = False,
) -> LogPage:
    """The page of the log `asked` for (GET /requests, the console's log page); an unknown
    `before` is refused, or with `restart` answered with the newest page."""
    async with sessions() as session:
        try:
            page = await page_requests(session, org_id, asked)
        except UnknownCursor:
            if not restart:
                raise InvalidRequest(
                    f"before: no request {asked.before!r} in this organization."
                ) from None
            page = await page_requests(session, org_id, replace(asked, before=None))
            return LogPage(page.requests, page.next, restarted=True)
    return LogPage(page.requests, page.next)


async def find_logged_request(
    sessions: async_sessionmaker[AsyncSession], org_id: str, request_id: str
) -> BilledRequest | None:
    """The organization's request `request_id`, or None (another's is none of its own)."""
    async with sessions() as session:
        return await find_request(session, org_id, request_id)


async def logged_request(
    sessions: async_sessionmaker[AsyncSession], org_id: str, request_id: str
) -> BilledRequest:
    """The organization's request `request_id`; NotFound when it has none of that id."""
    found = await find_logged_request(sessions, org_id, request_id)
    if found is None:
        # The same answer for another organization's request and an unknown one.
        raise NotFound(f"No request with id {request_id!r}.")
    return found


async def org_requests(session: AsyncSession, org_id: str, limit: int) -> Sequence[BilledRequest]:
    """The newest `limit` requests of an organization an operator names; UnknownId when
    there is none."""
    await require_org(session, org_id)
    return await recent_requests(session, org_id, limit)
