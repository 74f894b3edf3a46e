"""Console sign-in sessions, kept server-side so that signing out (or a disabled user, a
reset password, a suspended account) ends them on every node at once."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.models import Account, ConsoleSession, User, utcnow
from voice_service.tenancy.service import ACTIVE


@dataclass(frozen=True, slots=True)
class SignedIn:
    """The user behind a request's session cookie."""

    user_id: str
    email: str
    account_id: str
    csrf_token: str


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def start_session(session: AsyncSession, user: User, lifetime: timedelta) -> str:
    """Sign `user` in: a new session, whose token (for the cookie) is stored only hashed."""
    now = utcnow()
    # The user's expired sessions go now, so the table holds only what might still be used.
    await session.execute(
        delete(ConsoleSession).where(
            ConsoleSession.user_id == user.id, ConsoleSession.expires_at <= now
        )
    )
    await session.execute(update(User).where(User.id == user.id).values(last_sign_in_at=now))
    token = secrets.token_urlsafe(32)
    session.add(
        ConsoleSession(
            token_hash=_token_hash(token),
            user_id=user.id,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            expires_at=now + lifetime,
        )
    )
    return token


async def find_session(session: AsyncSession, token: str) -> SignedIn | None:
    """The live session with this token, if its user may still use the console."""
    row = (
        await session.execute(
            select(ConsoleSession, User)
            .join(User, ConsoleSession.user_id == User.id)
            .join(Account, User.account_id == Account.id)
            .where(
                ConsoleSession.token_hash == _token_hash(token),
                ConsoleSession.expires_at > utcnow(),
                User.status == ACTIVE,
                Account.status == ACTIVE,
            )
        )
    ).one_or_none()
    if row is None:
        return None
    console_session, user = row
    return SignedIn(user.id, user.email, user.account_id, console_session.csrf_token)


async def end_session(session: AsyncSession, token: str) -> None:
    await session.execute(
        delete(ConsoleSession).where(ConsoleSession.token_hash == _token_hash(token))
    )


async def end_user_sessions(session: AsyncSession, user_id: str) -> None:
    await session.execute(delete(ConsoleSession).where(ConsoleSession.user_id == user_id))
