"""The audit log: every change made through the console, and every sign-in attempt.

A service that makes a change on a console user's behalf takes an `Actor` and records the
event in the change's own transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.ids import new_id
from voice_service.core.models import AuditEvent
from voice_service.tenancy.console_sessions import SignedIn


class Action(StrEnum):
    SIGN_IN = "sign_in"
    SIGN_IN_FAILED = "sign_in_failed"
    SIGN_IN_THROTTLED = "sign_in_throttled"
    SIGN_OUT = "sign_out"
    KEY_CREATED = "key_created"
    KEY_REVOKED = "key_revoked"
    VOICE_CLONED = "voice_cloned"
    VOICE_DELETED = "voice_deleted"
    JOB_CANCELLED = "job_cancelled"
    WEBHOOK_CREATED = "webhook_created"
    WEBHOOK_ENABLED = "webhook_enabled"
    WEBHOOK_DISABLED = "webhook_disabled"
    WEBHOOK_DELETED = "webhook_deleted"
    DELIVERY_REDELIVERED = "delivery_redelivered"
    DICTIONARY_CREATED = "pronunciation_dictionary_created"
    DICTIONARY_DELETED = "pronunciation_dictionary_deleted"


def record_event(
    session: AsyncSession,
    action: Action,
    *,
    account_id: str | None,
    user_id: str | None,
    email: str | None,
    target: str | None = None,
    ip: str | None = None,
) -> None:
    """Add the event to the caller's transaction: it commits with the change it records."""
    session.add(
        AuditEvent(
            id=new_id("audit"),
            account_id=account_id,
            user_id=user_id,
            email=email,
            action=action.value,
            target=target,
            ip=ip,
        )
    )


@dataclass(frozen=True, slots=True)
class Actor:
    """A signed-in console user, and the address their request came from."""

    user: SignedIn
    ip: str | None

    def record(self, session: AsyncSession, action: Action, target: str) -> None:
        """A change this user made, in the caller's transaction."""
        record_event(
            session,
            action,
            account_id=self.user.account_id,
            user_id=self.user.user_id,
            email=self.user.email,
            target=target,
            ip=self.ip,
        )


async def list_events(
    session: AsyncSession, account_id: str, limit: int = 1000
) -> Sequence[AuditEvent]:
    """The account's events, newest first."""
    result = await session.scalars(
        select(AuditEvent)
        .where(AuditEvent.account_id == account_id)
        .order_by(AuditEvent.created_at.desc(), AuditEvent.id)
        .limit(limit)
    )
    return result.all()
