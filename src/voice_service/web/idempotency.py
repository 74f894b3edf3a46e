"""The HTTP half of `Idempotency-Key` (the books' half is `books.idempotency.keys`): the
header checked, the request fingerprinted, the key claimed for this request, or its first
answer raised to be sent again."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from urllib.parse import urlencode

from fastapi import Request
from sqlalchemy.exc import IntegrityError

from voice_service.books.idempotency import repository
from voice_service.books.idempotency.fingerprint import fingerprint
from voice_service.books.idempotency.keys import HEADER, HeldKey, StoredAnswer, answer_name
from voice_service.books.ledger import Ledger
from voice_service.core.errors import ClientClosedRequest, IdempotencyKeyInUse, InvalidRequest
from voice_service.core.models import IdempotencyEntry
from voice_service.kit.db import transaction
from voice_service.tenancy.principal import Principal
from voice_service.web.context import AppContext

_VALID_KEY = re.compile(r"[\x20-\x7e]{1,255}")  # printable ASCII
POLL_SECONDS = 0.2  # how often a retry looks whether the first request has finished


async def claim_idempotency_key(
    request: Request,
    context: AppContext,
    ledger: Ledger,
    principal: Principal,
    key: str,
    digest: str | None = None,
) -> None:
    """Claim `key` for the request to run; or raise `StoredAnswer` with the key's first
    answer (after waiting for it, if it still runs). `digest`: the request's fingerprint,
    if its handler took it as the body streamed in (else the body is read here)."""
    if _VALID_KEY.fullmatch(key) is None:
        raise InvalidRequest(f"{HEADER}: 1 to 255 printable ASCII characters.", param=HEADER)
    if digest is None:
        body = await request.body()  # kept by the request for its handler to parse
        digest = fingerprint(
            request.method, request_target(request), request.headers.get("content-type"), body
        )
    settings = context.settings
    give_up = time.monotonic() + settings.queue_timeout_seconds + settings.inference_timeout_seconds
    while True:
        outcome = await _claim(context, principal.org_id, key, digest, ledger.request_id)
        if isinstance(outcome, repository.Claimed):
            if outcome.stale_answer is not None:
                with contextlib.suppress(Exception):  # an orphan costs only storage
                    await context.blobs.drop_answer(
                        answer_name(principal.org_id, outcome.stale_answer)
                    )
            ledger.hold_key(
                HeldKey(
                    context.sessions,
                    context.blobs,
                    context.books.clock,
                    principal.org_id,
                    key,
                    ledger.request_id,
                    billed_before=outcome.billed,
                    max_bytes=settings.idempotent_answer_max_bytes,
                )
            )
            return
        if isinstance(outcome, repository.Mismatch):
            raise InvalidRequest(
                f"{HEADER}: this key was used in the last 24 hours with a different request "
                "(method, path or body); use a new key for a new request.",
                param=HEADER,
            )
        if isinstance(outcome, repository.Done):
            raise await _stored(context, outcome.entry)
        # Its first request is still running: wait for its answer.
        if time.monotonic() >= give_up:
            raise IdempotencyKeyInUse()
        if ledger.client_gone.is_set():
            raise ClientClosedRequest()
        await asyncio.sleep(POLL_SECONDS)


async def _claim(
    context: AppContext, org_id: str, key: str, digest: str, request_id: str
) -> repository.Claim:
    try:
        async with transaction(context.sessions) as session:
            return await repository.claim(
                session, org_id, key, digest, request_id, context.books.clock()
            )
    except IntegrityError:  # another request inserted the key first
        return repository.Running()


async def _stored(context: AppContext, entry: IdempotencyEntry) -> StoredAnswer:
    assert entry.status is not None
    if entry.body_in_store:
        body = await context.blobs.answer(answer_name(entry.org_id, entry.request_id))
    else:
        body = entry.body or b""
    return StoredAnswer(entry.status, entry.error_code, entry.content_type, body)


def request_target(request: Request) -> str:
    """The path, and the query (which can choose the answer's format) in a canonical order."""
    query = sorted(request.query_params.multi_items())
    return f"{request.url.path}?{urlencode(query)}" if query else request.url.path
