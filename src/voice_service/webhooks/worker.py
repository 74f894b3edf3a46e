"""This process's webhook deliveries: SAQ's worker on the `webhooks` queue (a queue of its
own, so no delivery waits behind a long transcription), with one HTTP client."""

from __future__ import annotations

import httpx
from saq.types import Context

from voice_service.kit.job_queue import InAppWorker, SqlQueue
from voice_service.runtime import Runtime
from voice_service.webhooks.delivery import attempt
from voice_service.webhooks.fair_shares import FairShares
from voice_service.webhooks.service import DELIVER, QUEUE_NAME

CONCURRENCY = 8  # attempts under way at once: each mostly waits on a receiver
ORG_SHARE = 2  # of them, the most one organization's receivers hold


class DeliveryWorkers:
    def __init__(self, runtime: Runtime) -> None:
        self.queue = SqlQueue(runtime.sessions, QUEUE_NAME)
        self._runtime = runtime
        self.shares = FairShares(ORG_SHARE)
        self._client: httpx.AsyncClient | None = None
        self._worker: InAppWorker | None = None

    def start(self) -> None:
        # No redirects: a receiver may not send a signed event on to another address.
        self._client = httpx.AsyncClient(
            timeout=self._runtime.settings.webhook_timeout_seconds, follow_redirects=False
        )
        self._worker = InAppWorker(
            self.queue, functions=[(DELIVER, self._deliver)], concurrency=CONCURRENCY
        )
        self._worker.begin("webhook-worker")

    async def stop(self) -> None:
        if self._worker is not None:
            await self._worker.end()
        if self._client is not None:
            await self._client.aclose()

    async def _deliver(
        self, _ctx: Context, *, delivery_id: str, retry: int, deferred: int = 0
    ) -> None:
        assert self._client is not None
        await attempt(
            self._runtime, self.queue, self._client, self.shares, delivery_id, retry, deferred
        )
