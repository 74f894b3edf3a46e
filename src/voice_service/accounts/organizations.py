"""The organizations a console user may open: those of their own account, and no other."""

from __future__ import annotations

from collections.abc import Sequence

from voice_service.accounts.repository import account_org, account_orgs
from voice_service.core.models import Organization
from voice_service.runtime import Runtime
from voice_service.tenancy.console_sessions import SignedIn


async def orgs_for(runtime: Runtime, user: SignedIn) -> Sequence[Organization]:
    """The organizations of the user's account, by name."""
    async with runtime.sessions() as session:
        return await account_orgs(session, user.account_id)


async def org_for(runtime: Runtime, user: SignedIn, org_id: str) -> Organization | None:
    """The organization, if it is one of the user's account's; None for any other."""
    async with runtime.sessions() as session:
        return await account_org(session, user.account_id, org_id)
