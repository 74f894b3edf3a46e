"""The units one request holds against its monthly caps: the one way a request, a live
session and a transcription job hold units (`caps.hold_units` says how a hold is counted).

A hold lasts from the first unit held until the request's usage row counts instead (dropped
in the billing transaction), the request ends unbilled (released), or a job it submitted
takes it over (the job's settling drops it)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.books.usage.caps import Held, drop_hold, hold_units
from voice_service.kit.db import transaction
from voice_service.tenancy.principal import Principal

logger = logging.getLogger(__name__)


class CapHold:
    __slots__ = ("_clock", "_handed_over", "_held", "_sessions", "request_id")

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Callable[[], datetime],
        request_id: str,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self.request_id = request_id
        self._held: Held | None = None
        self._handed_over = False

    @property
    def units(self) -> int:
        """What is held now (0 if nothing)."""
        return 0 if self._held is None else self._held.units

    @property
    def remaining(self) -> int | None:
        """What the tightest cap leaves once the held units are billed; None if no cap
        applies (or nothing was held)."""
        return None if self._held is None else self._held.remaining

    async def hold(self, principal: Principal, units: int) -> None:
        """Hold `units` (instead of what was held) in a transaction of its own, or raise
        `RateLimited` saying which cap they would pass. Nothing without a cap."""
        if not principal.capped:
            return
        async with transaction(self._sessions) as session:
            await self.hold_in(session, principal, units)

    async def hold_in(
        self,
        session: AsyncSession,
        principal: Principal,
        units: int,
        lasts_until: datetime | None = None,
    ) -> None:
        """`hold` in the caller's transaction, counting until `lasts_until` if given (a
        job's, for as long as it may run) rather than a request's lifetime."""
        if not principal.capped:
            return
        now = self._clock()
        self._held = await hold_units(session, principal, self.request_id, units, now, lasts_until)

    async def drop_in(self, session: AsyncSession) -> None:
        """In the billing transaction: the usage row counts instead."""
        if self._held is not None:
            await drop_hold(session, self.request_id)

    def hand_over(self) -> None:
        """A job the request submitted holds the units from now on: the request ending
        does not release them."""
        self._handed_over = True

    async def release(self) -> None:
        """The request ended unbilled: its units count no more. Should that fail, the hold
        stops counting after its lifetime."""
        if self._held is None or self._handed_over:
            return
        try:
            async with transaction(self._sessions) as session:
                await drop_hold(session, self.request_id)
        except Exception as exc:
            logger.error("could not drop the unit hold of %s: %r", self.request_id, exc)
