"""Rate limits while Redis is unreachable: each process keeps its share of every key's
limit in memory, says so, and goes back to the shared budget once Redis answers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis.asyncio
from sqlalchemy.engine import make_url

from tests.cluster.faultproxy import FaultProxy
from tests.helpers.app import REDIS_URL
from tests.helpers.ports import free_port
from voice_service.core.errors import RateLimited
from voice_service.kit.ratelimit import RateLimiter

pytestmark = pytest.mark.anyio

PROCESSES = 4  # e.g. 2 nodes x 2 workers
LIMIT = 10
RECOVERY_WAIT_SECONDS = 30  # a bound for a loaded machine; the probe runs every second


async def _allowed(limiter: RateLimiter, key: str, attempts: int) -> int:
    allowed = 0
    for _ in range(attempts):
        try:
            await limiter.hit(key, LIMIT)
            allowed += 1
        except RateLimited:
            pass
    return allowed


async def test_unreachable_redis_leaves_each_process_its_share() -> None:
    limiter = RateLimiter(f"redis://127.0.0.1:{free_port()}/0", timeout=1, processes=PROCESSES)
    try:
        assert await _allowed(limiter, "key_a", LIMIT) == LIMIT // PROCESSES
        assert limiter.degraded
    finally:
        await limiter.close()


@pytest.fixture
def redis_proxy() -> Iterator[FaultProxy]:
    if REDIS_URL is None:
        pytest.skip("needs VOICE_SERVICE_REDIS_URL")
    url = make_url(REDIS_URL.replace("redis://", "redis+x://", 1))
    proxy = FaultProxy((url.host or "127.0.0.1", url.port or 6379), "redis")
    try:
        yield proxy
    finally:
        proxy.close()


async def test_the_shared_budget_returns_with_redis(redis_proxy: FaultProxy) -> None:
    url = f"redis://127.0.0.1:{redis_proxy.port}/5"
    await redis.asyncio.from_url(url).flushdb()
    limiter = RateLimiter(url, timeout=1, processes=PROCESSES)
    try:
        assert await _allowed(limiter, "key_shared", LIMIT + 2) == LIMIT
        redis_proxy.set_mode("refuse")
        assert await _allowed(limiter, "key_outage", LIMIT) == LIMIT // PROCESSES
        assert limiter.degraded
        redis_proxy.set_mode("forward")
        async with asyncio.timeout(RECOVERY_WAIT_SECONDS):
            while True:
                if not limiter.degraded:
                    break
                await asyncio.sleep(0.1)
        # Shared again: the window Redis kept for the first key still holds.
        assert await _allowed(limiter, "key_shared", 1) == 0
        assert await _allowed(limiter, "key_after", LIMIT + 2) == LIMIT
    finally:
        await limiter.close()


async def test_a_silent_redis_costs_a_request_its_timeout_not_forever(
    redis_proxy: FaultProxy,
) -> None:
    limiter = RateLimiter(f"redis://127.0.0.1:{redis_proxy.port}/5", timeout=1, processes=2)
    try:
        await limiter.hit("key_pause", LIMIT)  # connected
        redis_proxy.set_mode("pause")
        async with asyncio.timeout(15):  # the 1 s timeouts, with room for a loaded machine
            assert await _allowed(limiter, "key_pause_2", LIMIT) == LIMIT // 2
        assert limiter.degraded
    finally:
        redis_proxy.set_mode("forward")
        await limiter.close()
