"""The queries of the console's accounts. Each organization lookup is scoped by the
signed-in user's account here, so no page can reach another account's organization."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.ids import new_id
from voice_service.core.models import LIVE_CONSOLE_KEY, ApiKey, Organization
from voice_service.kit.db import insert_if_absent
from voice_service.tenancy.keys import SecretHasher, generate_secret

API, CONSOLE = "api", "console"


async def account_orgs(session: AsyncSession, account_id: str) -> Sequence[Organization]:
    result = await session.scalars(
        select(Organization)
        .where(Organization.account_id == account_id)
        .order_by(Organization.name, Organization.id)
    )
    return result.all()


async def account_org(session: AsyncSession, account_id: str, org_id: str) -> Organization | None:
    return await session.scalar(
        select(Organization).where(Organization.id == org_id, Organization.account_id == account_id)
    )


async def org_keys(session: AsyncSession, org_id: str) -> Sequence[ApiKey]:
    """The keys people hold (the console's own key is not one of them), newest first."""
    result = await session.scalars(
        select(ApiKey)
        .where(ApiKey.org_id == org_id, ApiKey.kind == API)
        .order_by(ApiKey.created_at.desc(), ApiKey.id)
    )
    return result.all()


async def org_key(session: AsyncSession, org_id: str, key_id: str) -> ApiKey | None:
    return await session.scalar(
        select(ApiKey)
        .where(ApiKey.id == key_id, ApiKey.org_id == org_id, ApiKey.kind == API)
        .with_for_update()
    )


async def console_key_id(session: AsyncSession, hasher: SecretHasher, org_id: str) -> str:
    """The organization's console key, made at its first use. Requests the console makes
    for a user (Try it, cloning) are billed, rate limited and logged under it like any
    key's; its secret is hashed and forgotten at once, so no one can present it.

    Parallel first uses race to make it: the database keeps one (a unique partial index),
    the losers' inserts do nothing, and every caller reads the one that won."""
    existing = await _live_console_key(session, org_id)
    if existing is not None:
        return existing
    await session.execute(_insert_console_key(session, hasher, org_id))
    winner = await _live_console_key(session, org_id)
    if winner is None:  # the winner revoked in between: this request fails, the next makes one
        raise RuntimeError(f"no console key for {org_id} after making one")
    return winner


async def _live_console_key(session: AsyncSession, org_id: str) -> str | None:
    return await session.scalar(
        select(ApiKey.id).where(
            ApiKey.org_id == org_id, ApiKey.kind == CONSOLE, ApiKey.revoked_at.is_(None)
        )
    )


def _insert_console_key(session: AsyncSession, hasher: SecretHasher, org_id: str) -> Insert:
    unusable = generate_secret()
    # Only a conflict on the one-console-key index is the race; any other is an error.
    insert = insert_if_absent(
        session.get_bind().dialect,
        ApiKey,
        index_elements=["org_id"],
        index_where=text(LIVE_CONSOLE_KEY),
    )
    return insert.values(
        id=new_id("key"),
        org_id=org_id,
        name="console",
        prefix="console",
        secret_hash=hasher.hash(unusable.secret),
        kind=CONSOLE,
    )
