"""A provider's replicas: which one takes the next request, and which are left out.

Requests go to the replica with the fewest in flight, each replica taking at most
`max_concurrency` at once. A replica that fails `FAILURES_TO_LEAVE_OUT` requests in a row is
left out for `LEFT_OUT_SECONDS`; then one trial request decides whether it is back. A
request that finds every usable replica full waits in the provider's queue, which is bounded
like the inference pool's: past the bound it is refused at once with a Retry-After.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from urllib.parse import urlsplit, urlunsplit

from voice_service.core.errors import NodeBusy
from voice_service.inference.admission import CapabilityQueue

FAILURES_TO_LEAVE_OUT = 5
LEFT_OUT_SECONDS = 30.0


class NoReplica(Exception):
    """No replica can take the request: each is left out (or was already tried)."""


class ReplicaState(StrEnum):
    UP = "up"
    FAILING = "failing"  # its last request failed; still chosen
    LEFT_OUT = "left out"  # failed too often in a row; not chosen until its trial


@dataclass(slots=True)
class Replica:
    url: str  # as configured, credentials included
    in_flight: int = 0
    failures_in_a_row: int = 0
    left_out_until: float | None = None
    trial_running: bool = False

    @property
    def shown_url(self) -> str:
        """The URL without credentials, for /readyz, logs and error messages."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    def state(self, now: float) -> ReplicaState:
        if self.left_out_until is not None and (now < self.left_out_until or self.trial_running):
            return ReplicaState.LEFT_OUT
        return ReplicaState.FAILING if self.failures_in_a_row else ReplicaState.UP


@dataclass(slots=True)
class ReplicaSet:
    """The replicas of one provider and its queue of requests waiting for one."""

    urls: tuple[str, ...]
    max_concurrency: int
    max_queued: int
    clock: Callable[[], float] = time.monotonic
    replicas: list[Replica] = field(init=False)
    queue: CapabilityQueue = field(init=False, default_factory=CapabilityQueue)
    _waiters: deque[asyncio.Future[None]] = field(init=False, default_factory=deque)

    def __post_init__(self) -> None:
        self.replicas = [Replica(url) for url in self.urls]

    @property
    def can_serve(self) -> bool:
        """Some replica is not left out (or is due its trial)."""
        return self._can_serve(None)

    def _can_serve(self, exclude: Replica | None) -> bool:
        now = self.clock()
        return any(
            self._usable(replica, now) for replica in self.replicas if replica is not exclude
        )

    @asynccontextmanager
    async def replica(self, *, exclude: Replica | None = None) -> AsyncIterator[Replica]:
        """A replica other than `exclude` (the one a retry follows) to send one request to,
        held until the block ends. Waits its turn when every usable replica is full;
        refused with `NodeBusy` when the queue is full too, and with `NoReplica` when every
        replica is left out (or excluded)."""
        chosen = self._choose(exclude)
        if chosen is None:
            chosen = await self._wait(exclude)
        chosen.in_flight += 1
        started = self.clock()
        self.queue.running += 1
        try:
            yield chosen
        finally:
            chosen.in_flight -= 1
            chosen.trial_running = False
            self.queue.running -= 1
            self.queue.finished(self.clock() - started)
            self._wake_one()

    def succeeded(self, replica: Replica) -> None:
        replica.failures_in_a_row = 0
        replica.left_out_until = None

    def failed(self, replica: Replica) -> None:
        replica.failures_in_a_row += 1
        if replica.left_out_until is not None or replica.failures_in_a_row >= FAILURES_TO_LEAVE_OUT:
            # Left out, or a failed trial: out again for the full time.
            replica.left_out_until = self.clock() + LEFT_OUT_SECONDS

    def _usable(self, replica: Replica, now: float) -> bool:
        if replica.left_out_until is None:
            return True
        return now >= replica.left_out_until and not replica.trial_running

    def _choose(self, exclude: Replica | None) -> Replica | None:
        now = self.clock()
        free = [
            replica
            for replica in self.replicas
            if replica is not exclude
            and self._usable(replica, now)
            and replica.in_flight < self.max_concurrency
        ]
        if not free:
            return None
        chosen = min(free, key=lambda replica: replica.in_flight)
        if chosen.left_out_until is not None:  # due its trial: it alone decides
            chosen.trial_running = True
        return chosen

    async def _wait(self, exclude: Replica | None) -> Replica:
        if not self._can_serve(exclude):
            raise NoReplica()
        if self.queue.waiting >= self.max_queued:
            raise NodeBusy(self.queue.retry_after(self.max_concurrency * len(self.replicas)))
        self.queue.waiting += 1
        try:
            while True:
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                except BaseException:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                    elif not waiter.cancelled():
                        self._wake_one()  # woken just as it gave up: pass the turn on
                    raise
                chosen = self._choose(exclude)
                if chosen is not None:
                    return chosen
                if not self._can_serve(exclude):
                    raise NoReplica()
        finally:
            self.queue.waiting -= 1

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
