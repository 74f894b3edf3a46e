"""What a request running an Idempotency-Key gives its key: whether it was billed, and the
answer it sent, collected as it goes out so that the key can keep it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession


class KeyHold(Protocol):
    """What the ledger needs of the Idempotency-Key a request runs (idempotency/keys.py
    holds one): whether an earlier run was billed, marking it billed in the success's
    transaction, and keeping or releasing the answer once sent."""

    billed_before: bool
    max_bytes: int  # the largest answer kept

    async def billed(self, session: AsyncSession) -> None: ...

    async def finish(
        self, status: int, error_code: str | None, sent: SentAnswer | None
    ) -> None: ...


@dataclass(slots=True)
class SentAnswer:
    """What the response sent, as the middleware saw it go out: its body up to `max_bytes`
    (past them only that it was `too_large`, so a huge answer is never held twice)."""

    status: int
    content_type: str | None
    max_bytes: int
    body: bytearray = field(default_factory=bytearray)
    complete: bool = False  # the last body message went out
    too_large: bool = False

    def add(self, chunk: bytes, *, more: bool) -> None:
        if not self.too_large:
            self.body += chunk
            if len(self.body) > self.max_bytes:
                self.too_large = True
                self.body = bytearray()
        self.complete = not more

    def will_not_fit(self, content_length: str | None) -> bool:
        """The answer declares a length past `max_bytes`: its key will be released."""
        return (
            content_length is not None
            and content_length.isdigit()
            and (int(content_length) > self.max_bytes)
        )
