"""Requests the console makes for a signed-in user (Try it, cloning, deleting a clone).

They go through the organization's console key: the same checks as a key's request
(suspension, disabled services, rate limit), the same request-log row under the
organization, and billing like any API request. No key secret is stored or shown.
"""

from __future__ import annotations

from fastapi import Request

from voice_service.console.repository import console_key_id
from voice_service.core.errors import InternalError
from voice_service.core.models import Organization
from voice_service.kit.db import transaction
from voice_service.tenancy.principal import Principal, principal_for_key
from voice_service.web.context import AppContext
from voice_service.web.deps import admit, check_service


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
