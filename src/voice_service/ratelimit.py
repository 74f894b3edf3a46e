"""Per-key moving-window rate limits: exact (at most N in any 60 s), in memory or in Redis."""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass

from limits import RateLimitItemPerSecond
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string

from voice_service.errors import RateLimited


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
    def __init__(self, redis_url: str | None, window_seconds: int = 60) -> None:
        self._window_seconds = window_seconds
        # The memory storage is exact for one process; Redis (atomic Lua scripts in `limits`)
        # makes the budget shared by every node.
        uri = f"async+{redis_url}" if redis_url else "async+memory://"
        options = {"implementation": "redispy"} if redis_url else {}
        self._storage = storage_from_string(uri, **options)
        self._strategy = MovingWindowRateLimiter(self._storage)

    async def hit(self, key_id: str, per_window: int) -> Quota:
        """Count one request for `key_id`, or raise RateLimited if the window is full."""
        item = RateLimitItemPerSecond(per_window, self._window_seconds)
        allowed = await self._strategy.hit(item, "api-key", key_id)
        reset_at, remaining = await self._strategy.get_window_stats(item, "api-key", key_id)
        quota = Quota(limit=per_window, remaining=max(remaining, 0), reset_at=reset_at)
        if not allowed:
            retry_after = max(1, math.ceil(reset_at - time.time()))
            raise RateLimited(
                f"More than {per_window} requests in {self._window_seconds} s for this API key; "
                f"retry in {retry_after} s.",
                headers={"Retry-After": str(retry_after), **quota.headers()},
            )
        return quota

    async def ping(self) -> bool:
        healthy = self._storage.check()  # typed for both the sync and the async storages
        return bool(await healthy if inspect.isawaitable(healthy) else healthy)
