"""Moving-window limits per key: exact, separate budgets, Retry-After on 429."""

from __future__ import annotations

import asyncio
import secrets
import time

import httpx
import pytest
import redis

from tests.helpers.api import assert_error
from tests.helpers.app import REDIS_URL, Tenant, Tenants
from voice_service.core.errors import RateLimited
from voice_service.kit.ratelimit import RateLimiter

pytestmark = pytest.mark.anyio


async def test_key_over_its_limit_gets_429_with_retry_after(
    client: httpx.AsyncClient, tenants: Tenants
) -> None:
    tenant = await tenants.create(rate_limit=3)
    for _ in range(3):
        assert (await client.get("/voices", headers=tenant.headers)).status_code == 200
    response = await client.get("/voices", headers=tenant.headers)
    assert_error(response, 429, "RATE_LIMITED")
    assert 1 <= int(response.headers["retry-after"]) <= 60
    assert response.headers["x-ratelimit-remaining"] == "0"


async def test_responses_carry_the_remaining_budget(
    client: httpx.AsyncClient, tenants: Tenants
) -> None:
    tenant = await tenants.create(rate_limit=5)
    first = await client.get("/voices", headers=tenant.headers)
    second = await client.get("/voices", headers=tenant.headers)
    assert first.headers["x-ratelimit-limit"] == "5"
    assert first.headers["x-ratelimit-remaining"] == "4"
    assert second.headers["x-ratelimit-remaining"] == "3"


async def test_keys_have_separate_budgets(client: httpx.AsyncClient, tenants: Tenants) -> None:
    tenant = await tenants.create(rate_limit=2)
    sibling = await tenants.add_key(tenant, rate_limit=2)
    for _ in range(2):
        await client.get("/voices", headers=tenant.headers)
    assert (await client.get("/voices", headers=tenant.headers)).status_code == 429
    assert (await client.get("/voices", headers=sibling.headers)).status_code == 200


async def test_default_limit_is_100_per_minute(client: httpx.AsyncClient, tenant: Tenant) -> None:
    statuses = [
        (await client.get("/voices", headers=tenant.headers)).status_code for _ in range(101)
    ]
    assert statuses[:100] == [200] * 100
    assert statuses[100] == 429


async def test_limit_is_exact_under_concurrency(
    client: httpx.AsyncClient, tenants: Tenants
) -> None:
    tenant = await tenants.create(rate_limit=10)
    responses = await asyncio.gather(
        *(client.get("/voices", headers=tenant.headers) for _ in range(25))
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 10 + [429] * 15


@pytest.fixture(params=["memory", "redis"])
def limiter_storage(request: pytest.FixtureRequest) -> str | None:
    if request.param == "memory":
        return None
    url = REDIS_URL or "redis://127.0.0.1:6379/0"
    try:
        redis.Redis.from_url(url).ping()
    except redis.RedisError:
        pytest.skip(f"no Redis at {url}")
    return url


async def test_window_moves_rather_than_resetting(limiter_storage: str | None) -> None:
    limiter = RateLimiter(limiter_storage, window_seconds=8)
    key = f"key_{secrets.token_hex(6)}"
    start = time.monotonic()

    async def at(offset: float) -> None:
        await asyncio.sleep(max(0.0, start + offset - time.monotonic()))

    await limiter.hit(key, 2)
    await at(4.0)
    await limiter.hit(key, 2)
    # Each check below stays right for 3.5 s past its moment, so a stalled loop on a loaded
    # machine cannot change the outcome.
    await at(4.5)
    with pytest.raises(RateLimited):  # both hits are within the last 8 s
        await limiter.hit(key, 2)
    await at(8.5)  # the first hit has left the window, the second has not
    await limiter.hit(key, 2)
    with pytest.raises(RateLimited):
        await limiter.hit(key, 2)


async def test_refused_requests_do_not_count(limiter_storage: str | None) -> None:
    limiter = RateLimiter(limiter_storage, window_seconds=6)
    key = f"key_{secrets.token_hex(6)}"
    start = time.monotonic()
    await limiter.hit(key, 1)
    await asyncio.sleep(3.0)
    for _ in range(5):
        with pytest.raises(RateLimited):
            await limiter.hit(key, 1)
    # The first hit has left the window; the refusals, 3 s younger, would still be in it.
    await asyncio.sleep(max(0.0, start + 6.5 - time.monotonic()))
    await limiter.hit(key, 1)


async def test_unauthenticated_requests_do_not_spend_a_keys_budget(
    client: httpx.AsyncClient, tenants: Tenants
) -> None:
    tenant = await tenants.create(rate_limit=2)
    for _ in range(5):
        await client.get("/voices", headers={"Authorization": "Bearer nope"})
    assert (await client.get("/voices", headers=tenant.headers)).status_code == 200
