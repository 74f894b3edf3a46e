"""Who is calling: the bearer key resolved to its organization and account."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.core.models import Account, ApiKey, Organization
from voice_service.tenancy.service import SUSPENDED


@dataclass(frozen=True, slots=True)
class Principal:
    key_id: str
    key_prefix: str  # the key's display prefix: safe to log
    org_id: str
    account_id: str
    rate_limit: int | None
    suspended: bool
    disabled_services: frozenset[str]  # by the organization or its account
    account_disabled_services: frozenset[str]
    scopes: frozenset[str] | None  # what the key may do; None: everything
    capped: bool  # a monthly unit cap applies to the key or its organization

    def missing_scope_message(self, scope: str) -> str | None:
        """Why the key may not do what `scope` covers; None if it may."""
        if self.scopes is None or scope in self.scopes:
            return None
        return f"This API key lacks the {scope} scope."

    def disabled_message(self, service: str) -> str | None:
        """Why `service` is refused to this key, naming who disabled it; None if allowed."""
        if service in self.account_disabled_services:
            return f"The {service} service is disabled for this account."
        if service in self.disabled_services:
            return f"The {service} service is disabled for this organization."
        return None


async def find_principal(session: AsyncSession, secret_hash: str) -> Principal | None:
    """The live key with this hash, with its tenants' state; None if unknown or revoked."""
    return await _principal(session, ApiKey.secret_hash == secret_hash)


async def principal_of_secret(
    sessions: async_sessionmaker[AsyncSession], secret_hash: str
) -> Principal | None:
    """`find_principal` in a session of its own: the caller of a request, on a cache miss."""
    async with sessions() as session:
        return await find_principal(session, secret_hash)


async def principal_for_key(session: AsyncSession, key_id: str) -> Principal | None:
    """The same for a key the service holds itself (the console's), found by its id."""
    return await _principal(session, ApiKey.id == key_id)


async def principal_of_key(
    sessions: async_sessionmaker[AsyncSession], key_id: str
) -> Principal | None:
    """`principal_for_key` read now, in a session of its own: a Wyoming listener's key, or
    a key a running session looks at again."""
    async with sessions() as session:
        return await principal_for_key(session, key_id)


async def _principal(session: AsyncSession, which: ColumnElement[bool]) -> Principal | None:
    row = (
        await session.execute(
            select(ApiKey, Organization, Account)
            .join(Organization, ApiKey.org_id == Organization.id)
            .join(Account, Organization.account_id == Account.id)
            .where(which, ApiKey.revoked_at.is_(None))
        )
    ).one_or_none()
    if row is None:
        return None
    key, org, account = row
    return Principal(
        key_id=key.id,
        key_prefix=key.prefix,
        org_id=org.id,
        account_id=account.id,
        rate_limit=key.rate_limit,
        suspended=SUSPENDED in (org.status, account.status),
        disabled_services=frozenset(org.disabled_services) | frozenset(account.disabled_services),
        account_disabled_services=frozenset(account.disabled_services),
        scopes=None if key.scopes is None else frozenset(key.scopes),
        capped=org.monthly_units is not None or key.monthly_units is not None,
    )
