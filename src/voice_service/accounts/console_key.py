"""The organization's console key: what the requests the console makes for a signed-in
user (Try it, cloning, deleting a clone) run as. No key secret is stored or shown."""

from __future__ import annotations

from voice_service.accounts.repository import console_key_id
from voice_service.core.errors import InternalError
from voice_service.kit.db import transaction
from voice_service.runtime import Runtime
from voice_service.tenancy.keys import SecretHasher
from voice_service.tenancy.principal import Principal, principal_for_key


async def console_principal(runtime: Runtime, hasher: SecretHasher, org_id: str) -> Principal:
    """The principal of the organization's console key, the key made at its first use."""
    async with transaction(runtime.sessions) as session:
        key_id = await console_key_id(session, hasher, org_id)
        principal = await principal_for_key(session, key_id)
    if principal is None:  # the key was made or found just now in this transaction
        raise InternalError()
    return principal
