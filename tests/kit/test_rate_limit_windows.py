"""The moving window, in memory and in Redis alike: exact at its edges, refused hits not
counted, keys apart, idle keys forgotten."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from tests.helpers.app import REDIS_URL
from voice_service.core.errors import RateLimited
from voice_service.kit.ratelimit import LocalWindows, RateLimiter

pytestmark = pytest.mark.anyio

WINDOW = 60


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
async def limiter(request: pytest.FixtureRequest) -> AsyncIterator[tuple[RateLimiter, Clock]]:
    if request.param == "redis" and not REDIS_URL:
        pytest.skip("needs VOICE_SERVICE_REDIS_URL")
    clock = Clock()
    url = REDIS_URL if request.param == "redis" else None
    limiter = RateLimiter(url, window_seconds=WINDOW, clock=clock)
    yield limiter, clock
    await limiter.close()


async def counted(limiter: RateLimiter, key: str, limit: int) -> bool:
    try:
        await limiter.hit(key, limit)
    except RateLimited:
        return False
    return True


async def test_at_most_the_limit_in_any_window_and_a_slot_frees_as_its_hit_leaves(
    limiter: tuple[RateLimiter, Clock],
) -> None:
    rate, clock = limiter
    key = secrets.token_hex(8)  # Redis keeps windows across tests
    first = clock.now
    for remaining in (2, 1, 0):
        assert (await rate.hit(key, 3)).remaining == remaining
        clock.now += 10
    with pytest.raises(RateLimited) as refused:
        await rate.hit(key, 3)
    assert refused.value.headers["X-RateLimit-Reset"] == str(int(first + WINDOW))
    assert refused.value.headers["Retry-After"] == str(WINDOW - 30)
    clock.now = first + WINDOW  # the first hit is exactly a window old: out
    assert await counted(rate, key, 3)
    assert not await counted(rate, key, 3)


async def test_refused_hits_are_not_counted(limiter: tuple[RateLimiter, Clock]) -> None:
    rate, clock = limiter
    key = secrets.token_hex(8)
    assert await counted(rate, key, 1)
    for _ in range(5):
        clock.now += 1
        assert not await counted(rate, key, 1)
    clock.now += WINDOW - 5  # the one counted hit leaves; the refused ones never counted
    assert await counted(rate, key, 1)


async def test_keys_have_windows_of_their_own(limiter: tuple[RateLimiter, Clock]) -> None:
    rate, _ = limiter
    a, b = secrets.token_hex(8), secrets.token_hex(8)
    assert await counted(rate, a, 1)
    assert await counted(rate, b, 1)
    assert not await counted(rate, a, 1)


def test_idle_keys_are_forgotten_in_memory() -> None:
    clock = Clock()
    windows = LocalWindows(WINDOW, clock)
    windows.hit("a", 1)
    windows.hit("b", 1)
    clock.now += WINDOW + 1
    windows.hit("c", 1)
    assert len(windows) == 1
