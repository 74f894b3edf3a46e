"""Console sessions end when they expire, and when their user is disabled or reset."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.kit.db import run_in_transaction
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy
from voice_service.tenancy import users
from voice_service.tenancy.console_sessions import find_session, start_session


def test_a_session_lasts_its_lifetime_and_no_longer(settings: Settings) -> None:
    async def work(session: AsyncSession) -> tuple[bool, bool, bool]:
        org = await tenancy.create_org(session, "Org", None, None)
        new = await users.create_user(session, org.account_id, "s@example.com", None)
        live = await start_session(session, new.user, timedelta(hours=1))
        expired = await start_session(session, new.user, timedelta(seconds=-1))
        other = await start_session(session, new.user, timedelta(hours=1))
        found = await find_session(session, live) is not None
        gone = await find_session(session, expired) is None
        await users.reset_password(session, new.user.id, None)
        ended = await find_session(session, other) is None
        return found, gone, ended

    assert asyncio.run(run_in_transaction(settings, work)) == (True, True, True)


def test_a_disabled_users_sessions_end(settings: Settings) -> None:
    async def work(session: AsyncSession) -> bool:
        org = await tenancy.create_org(session, "Org", None, None)
        new = await users.create_user(session, org.account_id, "t@example.com", None)
        token = await start_session(session, new.user, timedelta(hours=1))
        await users.disable_user(session, new.user.id)
        return await find_session(session, token) is None

    assert asyncio.run(run_in_transaction(settings, work))
