"""The API keys an organization's people hold, as the console lists, creates and revokes
them: the console's own key is never one of them."""

from __future__ import annotations

from collections.abc import Sequence

from voice_service.accounts.repository import org_key, org_keys
from voice_service.core.models import ApiKey
from voice_service.core.vocabulary import Scope
from voice_service.kit.db import transaction
from voice_service.runtime import Runtime
from voice_service.tenancy.audit import Action, Actor
from voice_service.tenancy.keys import SecretHasher
from voice_service.tenancy.service import CreatedKey, create_key, revoke_key


async def api_keys(runtime: Runtime, org_id: str) -> Sequence[ApiKey]:
    """The organization's API keys, newest first."""
    async with runtime.sessions() as session:
        return await org_keys(session, org_id)


async def find_api_key(runtime: Runtime, org_id: str, key_id: str) -> ApiKey | None:
    """The key, if it is one of the organization's API keys; None for any other key."""
    async with runtime.sessions() as session:
        return await org_key(session, org_id, key_id)


async def create_api_key(
    runtime: Runtime,
    hasher: SecretHasher,
    org_id: str,
    name: str,
    rate_limit: int | None,
    *,
    scopes: Sequence[Scope] | None,
    monthly_units: int | None,
    actor: Actor | None = None,
) -> CreatedKey:
    """A new API key of the organization; its secret is in the answer only."""
    async with transaction(runtime.sessions) as session:
        created = await create_key(
            session,
            hasher,
            org_id,
            name,
            rate_limit,
            scopes=scopes,
            monthly_units=monthly_units,
        )
        if actor is not None:
            actor.record(session, Action.KEY_CREATED, _described(created.key, org_id))
    return created


async def revoke_api_key(
    runtime: Runtime, org_id: str, key_id: str, actor: Actor | None = None
) -> ApiKey | None:
    """Revoke the key; None, with nothing changed, unless it is one of the organization's
    API keys."""
    async with transaction(runtime.sessions) as session:
        # Scoped by the organization first: a key id from elsewhere is simply not found.
        if await org_key(session, org_id, key_id) is None:
            return None
        key = await revoke_key(session, key_id)
        if actor is not None:
            actor.record(session, Action.KEY_REVOKED, _described(key, org_id))
    return key


def _described(key: ApiKey, org_id: str) -> str:
    return f"{key.id} ({key.prefix}…) in {org_id}"
