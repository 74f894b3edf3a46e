"""The sign-in throttle reserves each attempt atomically, on either backend: parallel
attempts from several connections (as from several nodes) cannot all slip in before the
first of them has failed."""

from __future__ import annotations

import asyncio

from voice_service.accounts import throttle
from voice_service.kit.db import create_engine, migrate, session_factory, transaction
from voice_service.settings import Settings

PARALLEL = 12


async def reserve_in_parallel(settings: Settings, key: str, attempts: int) -> list[bool]:
    """Whether each attempt may go ahead, each in a transaction of its own."""
    engine = create_engine(settings)
    try:
        await migrate(engine)
        sessions = session_factory(engine)

        async def attempt() -> bool:
            async with transaction(sessions) as session:
                return await throttle.reserve(session, key) is None

        return list(await asyncio.gather(*(attempt() for _ in range(attempts))))
    finally:
        await engine.dispose()


def test_parallel_attempts_past_the_free_ones_let_exactly_one_through(settings: Settings) -> None:
    key = "email:parallel@example.com"
    free = asyncio.run(reserve_in_parallel(settings, key, throttle.FREE_FAILURES - 1))
    assert all(free)
    allowed = asyncio.run(reserve_in_parallel(settings, key, PARALLEL))
    assert allowed.count(True) == 1  # the fifth attempt; it now waits for its outcome


def test_a_success_clears_the_reserved_attempts(settings: Settings) -> None:
    key = "user:user_cleared"
    assert all(asyncio.run(reserve_in_parallel(settings, key, throttle.FREE_FAILURES)))

    async def clear() -> None:
        engine = create_engine(settings)
        try:
            async with transaction(session_factory(engine)) as session:
                await throttle.clear(session, key)
        finally:
            await engine.dispose()

    asyncio.run(clear())
    assert all(asyncio.run(reserve_in_parallel(settings, key, throttle.FREE_FAILURES)))
