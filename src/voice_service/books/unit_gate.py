"""Units held as a long request goes (a session's audio, text streamed in), never all at
once: a capped key stops at its cap, an uncapped one holds nothing."""

from __future__ import annotations

from voice_service.books.ledger import Ledger
from voice_service.core.errors import RateLimited


class UnitGate:
    """Under a monthly cap, a session holds its units before it takes what they pay for,
    `ahead` more at a time (or what is left of the cap): `RateLimited` once none is left.
    Without a cap it does nothing."""

    def __init__(self, ledger: Ledger, ahead: int) -> None:
        self._ledger = ledger
        self._ahead = ahead
        self._open = not ledger.capped

    async def __call__(self, units: int) -> None:
        """Hold `units` in all (what the session will have used)."""
        if self._open or units <= self._ledger.units_held:
            return
        try:
            await self._ledger.hold(units + self._ahead)
        except RateLimited:
            await self._ledger.hold(units)
        self._open = self._ledger.units_held == 0  # the cap was lifted meanwhile
