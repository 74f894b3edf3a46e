"""Per-key moving-window rate limits: exact (at most N in any 60 s), in memory or in Redis.

With Redis every process of every node shares one budget per key. While Redis is
unreachable each process falls back to its own in-memory window with its share of the
limit (limit / processes in the cluster), so the cluster as a whole stays within the
limit, and a background probe returns to Redis once it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass

from limits import RateLimitItemPerSecond
from limits.aio.storage import RedisStorage as AsyncRedisStorage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from voice_service.errors import RateLimited

logger = logging.getLogger(__name__)

PROBE_INTERVAL_SECONDS = 1.0
DEGRADED_WARNING = (
    "Redis is unreachable: each process enforces its share of every key's rate limit "
    "in memory until Redis answers again."
)


@dataclass(frozen=True, slots=True)
class Quota:
    limit: int
    remaining: int
    reset_at: float  # epoch seconds when the oldest counted request leaves the window

    def headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(math.ceil(self.reset_at)),
        }


class RateLimiter:
    def __init__(
        self,
        redis_url: str | None,
        *,
        timeout: float = 2.0,
        processes: int = 1,
        window_seconds: int = 60,
    ) -> None:
        """`timeout` bounds each Redis connect and command; `processes` is how many
        processes share a key's limit while Redis is unreachable."""
        self._window_seconds = window_seconds
        self._processes = processes
        self._local = MovingWindowRateLimiter(storage_from_string("async+memory://"))
        self._shared: MovingWindowRateLimiter | None = None
        if redis_url:
            # No retries: a Redis that does not answer within the timeout is treated as
            # down at once (redis-py's default backoff had requests wait 5 s for a 500).
            self._redis: AsyncRedisStorage = storage_from_string(  # type: ignore[assignment]
                f"async+{redis_url}",
                implementation="redispy",
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),  # type: ignore[arg-type]
            )
            self._shared = MovingWindowRateLimiter(self._redis)
        # A backstop over the socket timeouts: one hit is two commands.
        self._deadline = 2 * timeout + 1
        self._probe: asyncio.Task[None] | None = None

    @property
    def degraded(self) -> bool:
        """Redis is configured but unreachable: limits are per process for now."""
        return self._probe is not None

    async def hit(self, key_id: str, per_window: int) -> Quota:
        """Count one request for `key_id`, or raise RateLimited if the window is full."""
        counted = None
        if self._shared is not None and not self.degraded:
            try:
                async with asyncio.timeout(self._deadline):
                    counted = await self._count(self._shared, key_id, per_window)
            except Exception as exc:  # any failure of Redis or its client: go local
                self._degrade(exc)
        if counted is None:
            share = per_window if self._shared is None else max(1, per_window // self._processes)
            counted = await self._count(self._local, key_id, share)
        allowed, quota = counted
        if not allowed:
            retry_after = max(1, math.ceil(quota.reset_at - time.time()))
            raise RateLimited(
                f"More than {quota.limit} requests in {self._window_seconds} s for this API "
                f"key; retry in {retry_after} s.",
                headers={"Retry-After": str(retry_after), **quota.headers()},
            )
        return quota

    async def _count(
        self, strategy: MovingWindowRateLimiter, key_id: str, limit: int
    ) -> tuple[bool, Quota]:
        item = RateLimitItemPerSecond(limit, self._window_seconds)
        allowed = await strategy.hit(item, "api-key", key_id)
        reset_at, remaining = await strategy.get_window_stats(item, "api-key", key_id)
        return allowed, Quota(limit=limit, remaining=max(remaining, 0), reset_at=reset_at)

    async def check(self) -> None:
        """Ping Redis (if it is in use) so that an outage is noticed without traffic."""
        if self._shared is not None and not self.degraded and not await self._ping():
            self._degrade(None)

    async def _ping(self) -> bool:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self._deadline):
                return bool(await self._redis.check())
        return False

    def _degrade(self, cause: Exception | None) -> None:
        if self._probe is None:
            logger.warning("%s (%r)", DEGRADED_WARNING, cause)
            self._probe = asyncio.create_task(self._wait_for_redis(), name="redis-probe")

    async def _wait_for_redis(self) -> None:
        while True:
            if await self._ping():
                break
            await asyncio.sleep(PROBE_INTERVAL_SECONDS)
        logger.warning("Redis answers again: rate limits are shared by the cluster again.")
        self._probe = None

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
            self._probe = None
