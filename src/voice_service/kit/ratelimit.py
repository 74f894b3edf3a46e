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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from voice_service.core.errors import RateLimited

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


class LocalWindows:
    """Exact moving windows in this process's memory: per key, the times of the hits in
    the last window, oldest first. (limits' async memory storage spawned a task and a
    thread hop per hit for its expiry, a tenth of a cached request's cost.)"""

    def __init__(self, window_seconds: int, clock: Callable[[], float] = time.time) -> None:
        self._window = window_seconds
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}
        self._next_sweep = clock() + window_seconds

    def hit(self, key_id: str, limit: int) -> tuple[bool, Quota]:
        now = self._clock()
        self._sweep_idle_keys(now)
        hits = self._hits.setdefault(key_id, deque())
        while hits and hits[0] <= now - self._window:
            hits.popleft()
        allowed = len(hits) < limit
        if allowed:
            hits.append(now)
        reset_at = (hits[0] if hits else now) + self._window
        return allowed, Quota(limit=limit, remaining=max(limit - len(hits), 0), reset_at=reset_at)

    def __len__(self) -> int:
        return len(self._hits)

    def _sweep_idle_keys(self, now: float) -> None:
        # Once a window: keys with no hit in the last window are forgotten, so memory is
        # bounded by the keys in use, not by every key ever seen.
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._window
        cutoff = now - self._window
        for key_id in [k for k, hits in self._hits.items() if not hits or hits[-1] <= cutoff]:
            del self._hits[key_id]


# One round trip per hit. KEYS[1]: the key's hit times within the window, newest first:
# those that left the window are popped from the tail first (each once, so O(1) a hit
# amortized). A hit counts if fewer than `limit` remain; returns {counted (1 or 0), hits
# within the window, the oldest of them}.
_HIT_SCRIPT = """
local now, limit, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
while true do
    local last = redis.call('lindex', KEYS[1], -1)
    if not last or tonumber(last) > now - window then
        break
    end
    redis.call('rpop', KEYS[1])
end
local within = redis.call('llen', KEYS[1])
local counted = 0
if within < limit then
    redis.call('lpush', KEYS[1], ARGV[1])
    redis.call('expire', KEYS[1], window)
    within, counted = within + 1, 1
end
return {counted, within, redis.call('lindex', KEYS[1], -1) or ARGV[1]}
"""


class RateLimiter:
    def __init__(
        self,
        redis_url: str | None,
        *,
        timeout: float = 2.0,
        processes: int = 1,
        window_seconds: int = 60,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`timeout` bounds each Redis connect and command; `processes` is how many
        processes share a key's limit while Redis is unreachable."""
        self._window_seconds = window_seconds
        self._processes = processes
        self._clock = clock
        self._local = LocalWindows(window_seconds, clock)
        self._redis: Redis | None = None
        if redis_url:
            # No retries: a Redis that does not answer within the timeout is treated as
            # down at once (redis-py's default backoff held requests for seconds, then a 500).
            self._redis = Redis.from_url(
                redis_url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),
            )
            self._hit_script = self._redis.register_script(_HIT_SCRIPT)
        # A backstop over the socket timeouts: a hit is a connect and one command.
        self._deadline = 2 * timeout + 1
        self._probe: asyncio.Task[None] | None = None

    @property
    def degraded(self) -> bool:
        """Redis is configured but unreachable: limits are per process for now."""
        return self._probe is not None

    async def hit(self, key_id: str, per_window: int, *, subject: str = "this API key") -> Quota:
        """Count one request for `key_id`, or raise RateLimited if the window is full;
        `subject` names what is limited in the error's message."""
        counted = None
        if self._redis is not None and not self.degraded:
            try:
                async with asyncio.timeout(self._deadline):
                    counted = await self._shared_hit(key_id, per_window)
            except Exception as exc:  # any failure of Redis or its client: go local
                self._degrade(exc)
        if counted is None:
            share = per_window if self._redis is None else max(1, per_window // self._processes)
            counted = self._local.hit(key_id, share)
        allowed, quota = counted
        if not allowed:
            retry_after = max(1, math.ceil(quota.reset_at - self._clock()))
            raise RateLimited(
                f"More than {quota.limit} requests in {self._window_seconds} s for "
                f"{subject}; retry in {retry_after} s.",
                headers={"Retry-After": str(retry_after), **quota.headers()},
            )
        return quota

    async def _shared_hit(self, key_id: str, limit: int) -> tuple[bool, Quota]:
        now = self._clock()
        counted, within, oldest = await self._hit_script(
            keys=[f"voice-service:rate:{key_id}"], args=[repr(now), limit, self._window_seconds]
        )
        reset_at = float(oldest) + self._window_seconds
        return bool(counted), Quota(
            limit=limit, remaining=max(limit - within, 0), reset_at=reset_at
        )

    async def check(self) -> None:
        """Ping Redis (if it is in use) so that an outage is noticed without traffic."""
        if self._redis is not None and not self.degraded and not await self._ping():
            self._degrade(None)

    async def _ping(self) -> bool:
        assert self._redis is not None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self._deadline):
                return bool(await self._redis.ping())
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
        if self._redis is not None:
            await self._redis.aclose()
