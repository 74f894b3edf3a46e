"""Requests the console makes for a signed-in user (Try it, cloning, deleting a clone).

They go through the organization's console key: the same checks as a key's request
(suspension, disabled services, rate limit), the same request-log row under the
organization, and billing like any API request. No key secret is stored or shown.
"""

from __future__ import annotations

from fastapi import Request

from voice_service.auth.principal import Principal, principal_for_key
from voice_service.console.repository import console_key_id
from voice_service.context import AppContext
from voice_service.db import transaction
from voice_service.deps import admit, check_service
from voice_service.errors import InternalError
from voice_service.models import Organization


async def act_for_org(
    request: Request, context: AppContext, org: Organization, service: str | None
) -> Principal:
    async with transaction(context.sessions) as session:
        key_id = await console_key_id(session, context.hasher, org.id)
        principal = await principal_for_key(session, key_id)
    if principal is None:  # the key was made or found just now in this transaction
        raise InternalError()
    await admit(request, context, principal)
    if service is not None:
        check_service(principal, service)
    return principal
