"""The request ledger: what one request leaves in the books, written once.

Every request has exactly one request-log row; a billed success has exactly one usage row,
committed in one transaction with its log row and whatever else the success makes (a
clone's voice) before its answer starts (spec rules 2 and 3). A failure, a client that left
and a stream cut off are logged with what happened and billed nothing.

A `Ledger` is opened for each request by the middleware (or, for a request the app never
saw, by the server protocol), carried in its scope (`web/ledgers.py`) and handed to
handlers as a typed dependency. Whoever learns
how the request ended tells it, once:

- `billed(charge)`: a success's transaction; leaving it commits the usage row and the log
  row with the success's own writes, or nothing (a client gone by then: 499, not billed);
- `stream_ended(charge, outcome, bytes_sent)`: a streamed answer, billed if all of it went
  out, else logged with why it did not; `stream_cut_short` bills the part that went out
  (Wyoming's speech, as a WebSocket session is billed for what it used);
- `failed(error)`: an error answer is about to be sent; `answered(status)` then writes its
  row as the response starts (the middleware calls it for every answer: it does nothing for
  a request already settled or whose stream writes its own row).

Services say what a success costs (`Charge`); routes and streams pass it on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.books.idempotency.answers import KeyHold, SentAnswer
from voice_service.books.requestlog.repository import LogEntry, insert_entries
from voice_service.books.requestlog.writer import RequestLogWriter
from voice_service.books.usage.charge import Charge
from voice_service.books.usage.holds import CapHold
from voice_service.books.usage.repository import record_usage
from voice_service.core.errors import ApiError, ClientClosedRequest, InternalError
from voice_service.core.ids import new_id
from voice_service.core.models import utcnow
from voice_service.kit.db import transaction
from voice_service.kit.metrics.registry import Metrics
from voice_service.kit.ratelimit import Quota
from voice_service.tenancy.principal import Principal

logger = logging.getLogger(__name__)

MAX_LOGGED_PATH = 2048  # the column's width: a longer path must not cost the row
# A success's own rows, written in its billing transaction (given the session and the time).
BilledWrite = Callable[[AsyncSession, datetime], Awaitable[None]]
# What an unreachable or silent database or Redis raises (sockets, timeouts, the pool).
OUTAGES = (OSError, TimeoutError, OperationalError, InterfaceError, PoolTimeout)


@dataclass(slots=True)
class Books:
    """Where the rows go: the database, the request-log writer, and the metrics that
    count each row once it exists; `clock` dates usage, places it in its month, and dates
    idempotency keys' leases and expiry (one clock, which tests may set)."""

    sessions: async_sessionmaker[AsyncSession]
    request_log: RequestLogWriter
    metrics: Metrics
    clock: Callable[[], datetime] = utcnow


class Ledger:
    """One request's entry in the books. `client_gone` is set once its client has hung up
    (known only after its request body has been read)."""

    __slots__ = (
        "_error_code",
        "_hold",
        "_key",
        "_model",
        "_replayed",
        "_resource_id",
        "_settled",
        "_status",
        "_streaming",
        "_writes",
        "books",
        "client",
        "client_gone",
        "method",
        "path",
        "principal",
        "quota",
        "request_id",
        "started",
    )

    def __init__(
        self,
        books: Books,
        method: str,
        path: str,
        *,
        request_id: str | None = None,
        started: float | None = None,
        client: str | None = None,
    ) -> None:
        """`started`: `time.monotonic()` when the request began (now, if not given);
        `client`: the caller's address, for its log line."""
        self.books = books
        self.client = client
        self.request_id = request_id or new_id("req")
        self.method = method
        self.path = path[:MAX_LOGGED_PATH]
        self.started = time.monotonic() if started is None else started
        self.client_gone = asyncio.Event()
        self.principal: Principal | None = None
        self.quota: Quota | None = None  # the rate limit's state, for the response headers
        self._error_code: str | None = None
        self._hold = CapHold(books.sessions, books.clock, self.request_id)
        self._key: KeyHold | None = None  # the Idempotency-Key this request runs
        self._replayed = False  # answered with a key's stored answer
        self._resource_id: str | None = None
        self._model: str | None = None
        self._status: int | None = None  # of its row
        self._settled = False  # its row is written (or being written)
        self._streaming = False  # a stream writes its row when it ends
        self._writes: list[BilledWrite] = []  # the success's own rows, made as it is billed

    # --- what the request is -------------------------------------------------------------

    def made(self, resource_id: str) -> None:
        """The request made this (a job), which its row names."""
        self._resource_id = resource_id

    def heard_by(self, model: str) -> None:
        """The transcription model (or "provider:NAME") that heard the request's audio."""
        self._model = model

    def writes_when_billed(self, write: BilledWrite) -> None:
        """`write` adds the request's own rows in its billing transaction, whenever that
        comes (a stream's, at its end): they commit with the usage row or not at all."""
        self._writes.append(write)

    def admit(self, principal: Principal) -> None:
        """From here on the request is the key's organization's: logged and billed as such."""
        self.principal = principal

    @property
    def settled(self) -> bool:
        """Its row is written (or being written)."""
        return self._settled

    @property
    def capped(self) -> bool:
        """A monthly unit cap applies to the caller: units are held before any work."""
        return self.principal is not None and self.principal.capped

    @property
    def units_held(self) -> int:
        """What `hold` holds for the request now (0 if nothing)."""
        return self._hold.units

    @property
    def units_remaining(self) -> int | None:
        """What the tightest monthly cap leaves once this request is billed; None if no cap
        applies (or nothing was held)."""
        return self._hold.remaining

    async def hold(self, units: int) -> None:
        """Before any work: hold `units` against the key's and its organization's monthly
        caps, or raise `RateLimited` saying which one they would pass."""
        assert self.principal is not None, "only an admitted request holds units"
        await self._hold.hold(self.principal, units)

    async def hold_for_job(self, session: AsyncSession, units: int, lasts_until: datetime) -> None:
        """In the transaction that adds a job: its units held until `lasts_until`, by the
        job from then on (`job_took_hold`)."""
        assert self.principal is not None, "only an admitted request holds units"
        await self._hold.hold_in(session, self.principal, units, lasts_until)

    def job_took_hold(self) -> None:
        """The job the request added has committed: the request's answer leaves its hold."""
        self._hold.hand_over()

    # --- idempotency ---------------------------------------------------------------------

    def hold_key(self, key: KeyHold) -> None:
        """This request runs `key`'s request: its billing marks the key billed, and
        `finish_key` keeps its answer."""
        self._key = key

    @property
    def holds_key(self) -> bool:
        return self._key is not None

    def answer_to_keep(self, status: int, content_type: str | None) -> SentAnswer | None:
        """Where the middleware collects the answer for the request's key, if it holds one."""
        if self._key is None:
            return None
        return SentAnswer(status, content_type, self._key.max_bytes)

    async def finish_key(self, sent: SentAnswer | None) -> None:
        """The response has gone out (`sent`: what of it the middleware saw)."""
        if self._key is not None:
            await self._key.finish(self._status or 500, self._error_code, sent)

    def replay(self, error_code: str | None) -> None:
        """The answer is a key's stored one: logged as replayed, never billed."""
        self._replayed = True
        self._error_code = error_code

    # --- how the request ended ------------------------------------------------------------

    def failed(self, code: str) -> None:
        """The answer about to be sent is an error with this code (for its log row)."""
        self._error_code = code

    async def answered(self, status: int) -> None:
        """The response starts with `status`: its row, unless one is already written or the
        response is a stream (which writes its own when it ends)."""
        if self._settled or self._streaming:
            return
        await self._log(status, self._error_code)

    async def refused(self, error: ApiError) -> None:
        """An answer made outside the handlers (the middleware's, the server's own)."""
        self.failed(error.code)
        await self.answered(error.status)

    @asynccontextmanager
    async def billed(self, charge: Charge, status: int = 200) -> AsyncIterator[AsyncSession]:
        """A transaction for the success's own writes; on leaving it, they commit together
        with the usage row and the log row, or nothing does. If the client has left by the
        commit, `ClientClosedRequest` is raised instead and nothing commits."""
        async with self._billing(charge, status, bytes_sent=None) as session:
            yield session

    async def bill(self, charge: Charge) -> None:
        """Commit a success that writes nothing of its own."""
        async with self.billed(charge):
            pass

    def stream_starting(self) -> None:
        """The response is a stream: its row waits for `stream_ended`."""
        self._streaming = True

    async def stream_ended(self, charge: Charge, outcome: ApiError | None, bytes_sent: int) -> None:
        """A stream handed `bytes_sent` to the server, all of its body if `outcome` is None
        (billed, unless it used nothing; the client may have left after that), else why it
        stopped (not billed)."""
        if outcome is None and charge.units == 0:
            await self._log(200, None, bytes_sent)
            return
        if outcome is None:
            try:
                async with self._billing(charge, 200, bytes_sent=bytes_sent):
                    return
            except Exception as exc:
                # Everything was delivered, but neither row exists: log the failure instead.
                log_failure(self.request_id, exc)
                outcome = InternalError()
        self._error_code = outcome.code
        await self._log(outcome.status, outcome.code, bytes_sent)

    async def stream_cut_short(self, sent: Charge, outcome: ApiError, bytes_sent: int) -> None:
        """A stream stopped part-way (`outcome` says why: its client left, it failed) after
        the audio `sent` counts went out: billed for that audio, logged with the outcome's
        status and code."""
        self._error_code = outcome.code
        await self._bill_used(sent, outcome.status, bytes_sent, outcome.code)

    async def session_ended(
        self, charge: Charge, bytes_sent: int, error_code: str | None = None
    ) -> None:
        """A WebSocket session closed, whatever closed it: billed for what it used (its
        client may be long gone), logged with the upgrade's status, 101, and the code of
        the error that ended it, if one did."""
        await self._bill_used(charge, 101, bytes_sent, error_code)

    async def _bill_used(
        self, charge: Charge, status: int, bytes_sent: int, error_code: str | None
    ) -> None:
        if charge.units > 0:
            try:
                async with self._billing(charge, status, bytes_sent, error_code):
                    return
            except Exception as exc:
                log_failure(self.request_id, exc)
                self._error_code = InternalError.code
                await self._log(InternalError.status, InternalError.code, bytes_sent)
                return
        await self._log(status, error_code, bytes_sent)

    # --- the rows -------------------------------------------------------------------------

    @asynccontextmanager
    async def _billing(
        self, charge: Charge, status: int, bytes_sent: int | None, error_code: str | None = None
    ) -> AsyncIterator[AsyncSession]:
        principal = self.principal
        assert principal is not None, "only an admitted request is billed"
        books = self.books
        async with transaction(books.sessions) as session:
            yield session
            if bytes_sent is None and self.client_gone.is_set():
                raise ClientClosedRequest()
            await self._hold.drop_in(session)  # the usage row counts instead
            # A run of a key's request after a node died mid-way is billed only if the
            # first run was not.
            bills = self._key is None or not self._key.billed_before
            if self._key is not None:
                await self._key.billed(session)
            for write in self._writes:
                await write(session, books.clock())
            if bills:
                record_usage(session, principal, self.request_id, charge, books.clock())
            entry = self._entry(status, error_code, bytes_sent)
            await insert_entries(session, [entry], books.request_log.keys_to_refresh([entry]))
        self._settled, self._status = True, status
        books.request_log.announce(entry, principal.key_prefix, self.client)
        if bills:
            books.metrics.count_usage(charge.endpoint, charge.units, principal.org_id)

    async def _log(
        self, status: int, error_code: str | None, bytes_sent: int | None = None
    ) -> None:
        """The request's one line and row, durable (in the database, or the spool while the
        database cannot take it); a row that fits neither costs only itself."""
        self._settled, self._status = True, status
        await self._hold.release()
        entry = self._entry(status, error_code, bytes_sent)
        key_prefix = self.principal.key_prefix if self.principal else None
        request_log = self.books.request_log
        request_log.announce(entry, key_prefix, self.client)
        try:
            await request_log.write(entry)
        except Exception:
            # The caller still gets its answer; the operator gets the failure in the logs.
            logger.exception("could not write request log row %s", self.request_id)

    def _entry(self, status: int, error_code: str | None, bytes_sent: int | None) -> LogEntry:
        principal = self.principal
        return LogEntry(
            request_id=self.request_id,
            org_id=principal.org_id if principal else None,
            key_id=principal.key_id if principal else None,
            method=self.method,
            path=self.path,
            status=status,
            error_code=error_code,
            duration_ms=round((time.monotonic() - self.started) * 1000),
            bytes_sent=bytes_sent,
            replayed=self._replayed,
            resource_id=self._resource_id,
            model=self._model,
        )


def failure_answer(request_id: str, exc: Exception) -> ApiError:
    """What a request that raised `exc` answers, from within an `except` block: `exc` if it
    is an API error, else an internal error, the failure logged (`log_failure`)."""
    if isinstance(exc, ApiError):
        return exc
    log_failure(request_id, exc)
    return InternalError()


def log_failure(request_id: str, exc: Exception) -> None:
    """A request's unexpected failure, from within an `except` block: one line for an
    outage (not a traceback per request), the traceback for anything else."""
    if isinstance(exc, OUTAGES):
        logger.error("request %s failed: a backing service is unavailable: %r", request_id, exc)
    else:
        logger.exception("unhandled error in request %s", request_id)
