"""Console users: people of an account who sign in with an email and a password.

Passwords are hashed with argon2id (argon2-cffi's defaults, RFC 9106's second choice).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.ids import new_id
from voice_service.core.models import User
from voice_service.tenancy.console_sessions import end_user_sessions
from voice_service.tenancy.service import ACTIVE, UnknownId, require_account

MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024  # argon2 takes any length; this only bounds the work asked of it
DISABLED = "disabled"
MAX_EMAIL_LENGTH = 320  # RFC 3696's bound, and the column's width
MAX_EMAIL_LOCAL_PART = 64

_hasher = PasswordHasher()
# Verified when the email is unknown, so that an unknown email costs what a wrong password
# costs and the timing does not tell which it was.
_DUMMY_HASH = _hasher.hash(secrets.token_urlsafe(16))


class WeakPassword(ValueError):
    pass


class EmailTaken(ValueError):
    def __init__(self, email: str) -> None:
        super().__init__(f"A user with email {email!r} already exists.")


@dataclass(frozen=True, slots=True)
class NewUser:
    user: User
    generated_password: str | None  # set when none was given: shown once


class InvalidEmail(ValueError):
    def __init__(self, email: str) -> None:
        super().__init__(f"{email!r} is not an email address.")


def normalize_email(email: str) -> str:
    """The one form an email is stored, looked up and throttled under: no surrounding
    whitespace (Unicode's included), lower case. Raises `InvalidEmail` unless the result
    is an address: one @ between non-empty parts, no whitespace or control characters,
    at most 320 characters (64 before the @)."""
    normalized = email.strip().lower()
    local, at, domain = normalized.partition("@")
    if (
        not at
        or not local
        or not domain
        or "@" in domain
        or len(local) > MAX_EMAIL_LOCAL_PART
        or len(normalized) > MAX_EMAIL_LENGTH
        or not all(char.isprintable() and not char.isspace() for char in normalized)
    ):
        raise InvalidEmail(email)
    return normalized


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise WeakPassword(f"The password must have at least {MIN_PASSWORD_LENGTH} characters.")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise WeakPassword(f"The password must have at most {MAX_PASSWORD_LENGTH} characters.")


def generate_password() -> str:
    return secrets.token_urlsafe(18)  # 24 characters, 144 bits


def hash_password(password: str) -> str:
    check_password(password)
    return _hasher.hash(password)


def password_matches(password_hash: str | None, password: str) -> bool:
    """Constant work whether or not there is a hash to check against."""
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password[:MAX_PASSWORD_LENGTH]) and (
            password_hash is not None
        )
    except (VerificationError, InvalidHashError):
        return False


async def create_user(
    session: AsyncSession, account_id: str, email: str, password: str | None
) -> NewUser:
    await require_account(session, account_id)
    email = normalize_email(email)
    if await find_by_email(session, email) is not None:
        raise EmailTaken(email)
    generated = generate_password() if password is None else None
    user = User(
        id=new_id("user"),
        account_id=account_id,
        email=email,
        password_hash=hash_password(password if password is not None else generated or ""),
        status=ACTIVE,
    )
    session.add(user)
    await session.flush()
    return NewUser(user=user, generated_password=generated)


async def find_by_email(session: AsyncSession, email: str) -> User | None:
    """The user with this address, given as `normalize_email` returned it."""
    return await session.scalar(select(User).where(User.email == email))


async def require_user(session: AsyncSession, user_id: str) -> User:
    user = await session.get(User, user_id, with_for_update=True)
    if user is None:
        raise UnknownId("user", user_id)
    return user


async def list_users(session: AsyncSession, account_id: str) -> Sequence[User]:
    await require_account(session, account_id)
    result = await session.scalars(
        select(User).where(User.account_id == account_id).order_by(User.created_at, User.id)
    )
    return result.all()


async def disable_user(session: AsyncSession, user_id: str) -> User:
    """The user can no longer sign in, and their open sessions end now."""
    user = await require_user(session, user_id)
    user.status = DISABLED
    await end_user_sessions(session, user.id)
    return user


async def reset_password(session: AsyncSession, user_id: str, password: str | None) -> NewUser:
    """A new password (generated when none is given); the user's open sessions end."""
    user = await require_user(session, user_id)
    generated = generate_password() if password is None else None
    user.password_hash = hash_password(password if password is not None else generated or "")
    await end_user_sessions(session, user.id)
    return NewUser(user=user, generated_password=generated)
