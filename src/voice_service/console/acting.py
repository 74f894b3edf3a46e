"""Requests the console makes for a signed-in user (Try it, cloning, deleting a clone).

They go through the organization's console key: the same checks as a key's request
(suspension, disabled services, rate limit), the same request-log row under the
organization, and billing like any API request. No key secret is stored or shown.
"""

from __future__ import annotations

from fastapi import Request

from voice_service.accounts.console_key import console_principal
from voice_service.core.models import Organization
from voice_service.tenancy.principal import Principal
from voice_service.web.context import AppContext
from voice_service.web.deps import admit, check_service


async def act_for_org(
    request: Request, context: AppContext, org: Organization, service: str | None
) -> Principal:
    principal = await console_principal(context, context.hasher, org.id)
    await admit(request, context, principal)
    if service is not None:
        check_service(principal, service)
    return principal
