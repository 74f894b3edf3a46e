"""A billed success commits its usage row and its request-log row together.

Both are written in one transaction, with whatever else the success makes (a clone's
voice), before the response starts. If that commit fails, none of it exists: the error
reaches the middleware, which answers 500 and logs that instead (spec rules 2 and 3: every
request has its row; only successes are billed). An answer whose client has already hung
up is not a success: nothing commits, and the request is logged 499.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.auth.principal import Principal
from voice_service.context import AppContext
from voice_service.db import transaction
from voice_service.errors import ClientClosedRequest
from voice_service.requestlog.record import RequestRecord
from voice_service.requestlog.repository import insert_entries
from voice_service.usage.repository import record_usage


@asynccontextmanager
async def billed_success(
    context: AppContext,
    record: RequestRecord,
    principal: Principal,
    endpoint: str,
    units: int,
    status: int = 200,
    bytes_sent: int | None = None,
) -> AsyncIterator[AsyncSession]:
    """A transaction for the success's own writes; on leaving it, they commit together
    with the usage row and the log row (`status`), or nothing does.

    Without `bytes_sent` the answer is still to be sent: if its client has left by the
    commit, `ClientClosedRequest` is raised instead and nothing commits. (A stream has
    handed its answer over by the time it is billed, and its client may then be gone.)"""
    async with transaction(context.sessions) as session:
        yield session
        if bytes_sent is None and record.client_gone.is_set():
            raise ClientClosedRequest()
        record_usage(session, principal, record.request_id, endpoint, units)
        entry = record.entry(status, principal, None, bytes_sent)
        await insert_entries(session, [entry], context.request_log.keys_to_refresh([entry]))
    record.written = True
    context.request_log.announce(entry, principal.key_prefix)
    context.metrics.count_usage(endpoint, units, principal.org_id)


async def bill_success(
    context: AppContext,
    record: RequestRecord,
    principal: Principal,
    endpoint: str,
    units: int,
    bytes_sent: int | None = None,
) -> None:
    """Commit a success that writes nothing of its own: its usage row and its log row."""
    async with billed_success(context, record, principal, endpoint, units, bytes_sent=bytes_sent):
        pass
