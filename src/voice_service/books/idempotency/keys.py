"""`Idempotency-Key` on the POSTs that do billable work, with Stripe's semantics.

The same key from the same organization with the same request (`fingerprint`) within 24 h
gets the first answer again, with `Idempotent-Replayed: true`: billed once, logged every
time. The same key with another request is refused; one whose first request still runs
waits for it, then gets its answer. Errors are not kept (a retry after a 5xx or 429 runs
again); other 4xx answers are.

`web.idempotency.claim_idempotency_key` (a route dependency, after authentication) claims
the key for the request or raises `StoredAnswer` to replay one. The request's ledger holds
the claim: its billing marks the key billed in the success's transaction, and when the
response has gone out the middleware hands it what was sent, to keep (`HeldKey.finish`).
While the request runs, its node renews a short lease on the key; if the node dies the lease
lapses and a retry runs the request again, billing it only if the first run was not billed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.books.idempotency import repository
from voice_service.books.idempotency.answers import SentAnswer
from voice_service.books.ledger import Ledger
from voice_service.core.errors import ClientClosedRequest, IdempotencyKeyInUse, InvalidRequest
from voice_service.core.models import IdempotencyEntry
from voice_service.kit.blobs import BlobStore
from voice_service.kit.db import transaction

logger = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
RELEASED_HEADER = "Idempotency-Key-Released"  # the answer is too large to keep
RENEW_SECONDS = repository.LEASE.total_seconds() / 3
NOT_KEPT = frozenset({408, 409, 429, 499})  # answers a retry should not get again
POLL_SECONDS = 0.2  # how often a retry looks whether the first request has finished


def keeps(status: int) -> bool:
    """Whether an answer with `status` is kept for retries: successes and the client's
    errors, not the service's (5xx), rate limits or timeouts."""
    return status < 500 and status not in NOT_KEPT


class StoredAnswer(Exception):
    """The key's first answer, to send again (see `error_handlers`)."""

    def __init__(
        self, status: int, error_code: str | None, content_type: str | None, body: bytes
    ) -> None:
        super().__init__(status)
        self.status = status
        self.error_code = error_code
        self.content_type = content_type
        self.body = body


class HeldKey:
    """A key this request runs: renewed while it runs, kept or released when it ends."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: BlobStore,
        clock: Callable[[], datetime],
        org_id: str,
        key: str,
        request_id: str,
        *,
        billed_before: bool,
        max_bytes: int,
    ) -> None:
        self._sessions = sessions
        self._store = store
        self._clock = clock
        self.org_id = org_id
        self.key = key
        self.request_id = request_id
        self.billed_before = billed_before  # an earlier run of it was billed: bill nothing
        self.max_bytes = max_bytes  # the largest answer kept
        self._renewer = asyncio.create_task(self._renew(), name="idempotency-lease")

    async def billed(self, session: AsyncSession) -> None:
        """In the success's transaction: the key's request is billed."""
        await repository.mark_billed(session, self.org_id, self.key, self.request_id)

    async def finish(self, status: int, error_code: str | None, sent: SentAnswer | None) -> None:
        """Keep the answer for retries, or release the key; a failure here is logged (the
        lease then lapses, and a retry runs the request again)."""
        self._renewer.cancel()
        try:
            if sent is not None and sent.complete and not sent.too_large and keeps(status):
                await self._keep(status, error_code, sent)
            else:
                if sent is not None and sent.too_large:
                    logger.info(
                        "idempotency key of %s released: its answer is over %d bytes",
                        self.request_id,
                        self.max_bytes,
                    )
                async with transaction(self._sessions) as session:
                    await repository.release(session, self.org_id, self.key, self.request_id)
        except Exception as exc:
            logger.error("idempotency key of %s not settled: %r", self.request_id, exc)

    async def _keep(self, status: int, error_code: str | None, sent: SentAnswer) -> None:
        body = bytes(sent.body)
        name = answer_name(self.org_id, self.request_id)
        in_store = await self._store.keep_answer(name, body)
        async with transaction(self._sessions) as session:
            await repository.complete(
                session,
                self.org_id,
                self.key,
                self.request_id,
                status=status,
                error_code=error_code,
                content_type=sent.content_type,
                body=None if in_store else body,
                body_in_store=in_store,
            )

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                async with transaction(self._sessions) as session:
                    await repository.renew(
                        session, self.org_id, self.key, self.request_id, self._clock()
                    )
            except Exception as exc:  # the next try may get through before the lease lapses
                logger.warning("idempotency lease of %s not renewed: %r", self.request_id, exc)


def answer_name(org_id: str, request_id: str) -> str:
    return f"{org_id}/{request_id}"


async def claim_key(
    sessions: async_sessionmaker[AsyncSession],
    store: BlobStore,
    clock: Callable[[], datetime],
    ledger: Ledger,
    key: str,
    digest: str,
    *,
    max_bytes: int,
    wait_seconds: float,
) -> None:
    """Claim `key` of the ledger's organization for its request, whose fingerprint is
    `digest`; or raise `StoredAnswer` with the key's first answer, after waiting up to
    `wait_seconds` for it if its request still runs."""
    principal = ledger.principal
    assert principal is not None, "a key is claimed after the request's key check"
    org_id = principal.org_id
    give_up = time.monotonic() + wait_seconds
    while True:
        outcome = await _claim(sessions, org_id, key, digest, ledger.request_id, clock())
        if isinstance(outcome, repository.Claimed):
            if outcome.stale_answer is not None:
                with contextlib.suppress(Exception):  # an orphan costs only storage
                    await store.drop_answer(answer_name(org_id, outcome.stale_answer))
            ledger.hold_key(
                HeldKey(
                    sessions,
                    store,
                    clock,
                    org_id,
                    key,
                    ledger.request_id,
                    billed_before=outcome.billed,
                    max_bytes=max_bytes,
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
            raise await _stored(store, outcome.entry)
        # Its first request is still running: wait for its answer.
        if time.monotonic() >= give_up:
            raise IdempotencyKeyInUse()
        if ledger.client_gone.is_set():
            raise ClientClosedRequest()
        await asyncio.sleep(POLL_SECONDS)


async def _claim(
    sessions: async_sessionmaker[AsyncSession],
    org_id: str,
    key: str,
    digest: str,
    request_id: str,
    now: datetime,
) -> repository.Claim:
    try:
        async with transaction(sessions) as session:
            return await repository.claim(session, org_id, key, digest, request_id, now)
    except IntegrityError:  # another request inserted the key first
        return repository.Running()


async def _stored(store: BlobStore, entry: IdempotencyEntry) -> StoredAnswer:
    assert entry.status is not None
    if entry.body_in_store:
        body = await store.answer(answer_name(entry.org_id, entry.request_id))
    else:
        body = entry.body or b""
    return StoredAnswer(entry.status, entry.error_code, entry.content_type, body)
