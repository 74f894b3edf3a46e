"""Accounts, organizations and API keys: the operator's side of tenancy (used by the CLI)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.ids import new_id
from voice_service.core.models import Account, ApiKey, Organization, utcnow
from voice_service.core.vocabulary import Scope, Service
from voice_service.tenancy.cache import record_change
from voice_service.tenancy.keys import SecretHasher, generate_secret

TenantKind = Literal["account", "org"]
ACTIVE, SUSPENDED = "active", "suspended"


class UnknownId(LookupError):
    def __init__(self, kind: str, id_: str) -> None:
        super().__init__(f"No {kind} with id {id_!r}.")


@dataclass(frozen=True, slots=True)
class CreatedKey:
    key: ApiKey
    secret: str


async def create_org(
    session: AsyncSession, name: str, account_id: str | None, clone_limit: int | None
) -> Organization:
    if account_id is None:
        account = Account(id=new_id("acct"), disabled_services=[])
        session.add(account)
        account_id = account.id
    elif await session.get(Account, account_id) is None:
        raise UnknownId("account", account_id)
    org = Organization(
        id=new_id("org"),
        account_id=account_id,
        name=name,
        clone_limit=clone_limit,
        disabled_services=[],
    )
    session.add(org)
    await session.flush()
    return org


async def _tenant(session: AsyncSession, kind: TenantKind, id_: str) -> Account | Organization:
    tenant: Account | Organization | None
    if kind == "account":
        tenant = await session.get(Account, id_, with_for_update=True)
    else:
        tenant = await session.get(Organization, id_, with_for_update=True)
    if tenant is None:
        raise UnknownId("account" if kind == "account" else "organization", id_)
    return tenant


async def set_status(session: AsyncSession, kind: TenantKind, id_: str, status: str) -> None:
    tenant = await _tenant(session, kind, id_)
    tenant.status = status
    await record_change(session)


async def set_service_enabled(
    session: AsyncSession, kind: TenantKind, id_: str, service: str, enabled: bool
) -> list[str]:
    if service not in {known.value for known in Service}:
        names = ", ".join(Service)
        raise ValueError(f"Unknown service {service!r}; one of {names}.")
    tenant = await _tenant(session, kind, id_)
    disabled = set(tenant.disabled_services)
    if enabled:
        disabled.discard(service)
    else:
        disabled.add(service)
    tenant.disabled_services = sorted(disabled)  # reassigned: JSON columns track assignment
    await record_change(session)
    return tenant.disabled_services


def parse_scopes(value: str) -> list[Scope]:
    """A comma-separated list of scope names, each known."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise ValueError(f"Name at least one scope: {', '.join(Scope)}.")
    known = {scope.value: scope for scope in Scope}
    for name in names:
        if name not in known:
            raise ValueError(f"Unknown scope {name!r}; one of {', '.join(Scope)}.")
    return [known[name] for name in names]


async def set_org_cap(session: AsyncSession, org_id: str, monthly_units: int | None) -> None:
    """Cap the organization's billed units per UTC month (None: no cap)."""
    org = await session.get(Organization, org_id, with_for_update=True)
    if org is None:
        raise UnknownId("organization", org_id)
    org.monthly_units = monthly_units
    await record_change(session)  # cached keys learn that a cap applies


async def require_account(session: AsyncSession, account_id: str) -> Account:
    account = await session.get(Account, account_id)
    if account is None:
        raise UnknownId("account", account_id)
    return account


async def require_org(session: AsyncSession, org_id: str) -> Organization:
    org = await session.get(Organization, org_id)
    if org is None:
        raise UnknownId("organization", org_id)
    return org


async def create_key(
    session: AsyncSession,
    hasher: SecretHasher,
    org_id: str,
    name: str | None,
    rate_limit: int | None,
    *,
    scopes: Sequence[Scope] | None = None,
    monthly_units: int | None = None,
) -> CreatedKey:
    """A new key; with `scopes` it may do only what they cover (None: everything), with
    `monthly_units` it is billed at most that many units per UTC month."""
    await require_org(session, org_id)
    new = generate_secret()
    key = ApiKey(
        id=new_id("key"),
        org_id=org_id,
        name=name,
        prefix=new.prefix,
        secret_hash=hasher.hash(new.secret),
        rate_limit=rate_limit,
        scopes=None if scopes is None else sorted(set(scopes)),
        monthly_units=monthly_units,
    )
    session.add(key)
    await session.flush()
    return CreatedKey(key=key, secret=new.secret)


async def revoke_key(session: AsyncSession, key_id: str) -> ApiKey:
    key = await session.get(ApiKey, key_id, with_for_update=True)
    if key is None:
        raise UnknownId("API key", key_id)
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        await record_change(session)
    return key


async def list_keys(session: AsyncSession, org_id: str) -> Sequence[ApiKey]:
    await require_org(session, org_id)
    result = await session.scalars(
        select(ApiKey).where(ApiKey.org_id == org_id).order_by(ApiKey.created_at)
    )
    return result.all()


async def count_orgs(session: AsyncSession) -> int:
    return await session.scalar(select(func.count()).select_from(Organization)) or 0


async def list_accounts(session: AsyncSession) -> Sequence[tuple[Account, int]]:
    """Every account with its number of organizations, oldest first."""
    result = await session.execute(
        select(Account, func.count(Organization.id))
        .outerjoin(Organization, Organization.account_id == Account.id)
        .group_by(Account.id)
        .order_by(Account.created_at, Account.id)
    )
    return [(account, count) for account, count in result.all()]


async def list_orgs(session: AsyncSession, account_id: str | None) -> Sequence[Organization]:
    query = select(Organization).order_by(Organization.created_at, Organization.id)
    if account_id is not None:
        await require_account(session, account_id)
        query = query.where(Organization.account_id == account_id)
    return (await session.scalars(query)).all()


async def org_with_account(session: AsyncSession, org_id: str) -> tuple[Organization, Account]:
    org = await require_org(session, org_id)
    account = await session.get(Account, org.account_id)
    assert account is not None  # a foreign key
    return org, account
