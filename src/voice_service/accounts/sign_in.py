"""Signing in to the console and out of it: each attempt throttled per account (or unknown
email), its password checked off the event loop, and every outcome audited."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.accounts import throttle
from voice_service.accounts.password_checks import ChecksBusy, PasswordChecks
from voice_service.core.models import Account, User, utcnow
from voice_service.kit.db import transaction
from voice_service.runtime import Runtime
from voice_service.tenancy.audit import Action, Actor, record_event
from voice_service.tenancy.console_sessions import (
    SignedIn,
    end_session,
    find_session,
    start_session,
)
from voice_service.tenancy.service import SUSPENDED
from voice_service.tenancy.users import DISABLED, find_by_email

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Started:
    """Signed in: the new session's token (for the cookie) and how long it lasts."""

    token: str
    lifetime: timedelta


@dataclass(frozen=True, slots=True)
class Throttled:
    """Too many failures in a row for this email: seconds until the next attempt may go."""

    seconds: int


@dataclass(frozen=True, slots=True)
class Busy:
    """Every password check is busy."""


@dataclass(frozen=True, slots=True)
class WrongCredentials:
    """An unknown email or a wrong password: the answer does not say which."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The right password, but the user or their account may not sign in, and why."""

    reason: str


SignInOutcome = Started | Throttled | Busy | WrongCredentials | Refused


async def signed_in_user(runtime: Runtime, token: str) -> SignedIn | None:
    """The user of the live console session with this token, if they may still sign in."""
    async with runtime.sessions() as session:
        return await find_session(session, token)


async def attempt(
    runtime: Runtime, checks: PasswordChecks, email: str, password: str, ip: str | None
) -> SignInOutcome:
    """One attempt with a normalized email: reserved against its account (or unknown
    email), then checked."""
    if checks.full:
        return _busy(email)
    async with runtime.sessions() as session:
        user = await find_by_email(session, email)
        account = await session.get(Account, user.account_id) if user else None
    key = throttle.subject(user, email)
    async with transaction(runtime.sessions) as session:
        wait_until = await throttle.reserve(session, key)
        if wait_until is not None:
            _record(session, Action.SIGN_IN_THROTTLED, user, email, ip)
    if wait_until is not None:
        seconds = max(1, math.ceil((wait_until - utcnow()).total_seconds()))
        logger.warning("sign-in for %s refused: throttled for %d s more", email, seconds)
        return Throttled(seconds)
    # The hash is checked even for an unknown email: the answer takes as long either way.
    try:
        matches = await checks.matches(user.password_hash if user else None, password)
    except ChecksBusy:  # filled up since the check above; the attempt stays counted
        return _busy(email)
    if user is None or not matches:
        return await _failed(runtime, key, user, email, ip)
    return await _password_right(runtime, key, user, account, email, ip)


async def _failed(
    runtime: Runtime, key: str, user: User | None, email: str, ip: str | None
) -> WrongCredentials:
    async with transaction(runtime.sessions) as session:
        failures = await throttle.failures(session, key)
        _record(session, Action.SIGN_IN_FAILED, user, email, ip)
    if failures >= throttle.FREE_FAILURES:
        logger.warning("sign-in for %s failed %d times in a row", email, failures)
    return WrongCredentials()


async def _password_right(
    runtime: Runtime, key: str, user: User, account: Account | None, email: str, ip: str | None
) -> Started | Refused:
    refusal = _refusal(user, account)
    lifetime = timedelta(hours=runtime.settings.console_session_hours)
    async with transaction(runtime.sessions) as session:
        await throttle.clear(session, key)  # the password was right
        if refusal is not None:
            _record(session, Action.SIGN_IN_FAILED, user, email, ip, target=refusal)
        else:
            token = await start_session(session, user, lifetime)
            _record(session, Action.SIGN_IN, user, email, ip)
    if refusal is not None:
        return Refused(refusal)
    return Started(token, lifetime)


def _refusal(user: User, account: Account | None) -> str | None:
    """Why a user with the right password may still not sign in."""
    if user.status == DISABLED:
        return "This user is disabled. Contact your operator."
    if account is None or account.status == SUSPENDED:
        return "This account is suspended. Contact your operator."
    return None


def _busy(email: str) -> Busy:
    logger.warning("sign-in for %s refused: every password check is busy", email)
    return Busy()


def _record(
    session: AsyncSession,
    action: Action,
    user: User | None,
    email: str,
    ip: str | None,
    target: str | None = None,
) -> None:
    record_event(
        session,
        action,
        account_id=user.account_id if user else None,
        user_id=user.id if user else None,
        email=email,
        target=target,
        ip=ip,
    )


async def sign_out(runtime: Runtime, token: str, actor: Actor) -> None:
    """End the console session with this token, audited as the actor's."""
    async with transaction(runtime.sessions) as session:
        await end_session(session, token)
        actor.record(session, Action.SIGN_OUT, actor.user.email)
