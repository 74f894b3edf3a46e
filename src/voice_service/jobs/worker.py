"""This process's share of the job queue: SAQ's worker over the service's own database
(`kit.job_queue`), running `JOB_WORKERS` jobs at once, and the retention sweep. Every node
that runs a worker takes jobs from the same queue; a job whose node died is taken over once
its heartbeat lapses."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid

from saq.job import Job as QueuedJob
from saq.types import Context, PartialTimersDict

from voice_service.jobs.retention import sweep_forever
from voice_service.jobs.runner import run_job
from voice_service.jobs.service import QUEUE_NAME, RUN
from voice_service.kit.job_queue import InAppWorker, SqlQueue
from voice_service.runtime import Runtime

logger = logging.getLogger(__name__)


class JobWorkers:
    def __init__(self, runtime: Runtime, webhooks: SqlQueue) -> None:
        """`webhooks`: the queue jobs' events are delivered from."""
        self.queue = SqlQueue(runtime.sessions, QUEUE_NAME)
        self.webhooks = webhooks
        self._runtime = runtime
        self._worker: InAppWorker | None = None
        self._sweeping: asyncio.Task[None] | None = None

    def start(self) -> None:
        settings = self._runtime.settings
        self._sweeping = asyncio.create_task(
            sweep_forever(self._runtime, self.queue, self.webhooks), name="job-sweep"
        )
        if settings.job_workers == 0:
            return
        # Twice a lease, the queue looks for jobs whose worker stopped reporting.
        sweep = max(1, settings.job_lease_seconds // 2)
        self._worker = InAppWorker(
            self.queue,
            functions=[(RUN, self._run)],
            id=f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
            concurrency=settings.job_workers,
            timers=PartialTimersDict(schedule=1, worker_info=10, sweep=sweep, abort=1),
        )
        self._worker.begin("job-worker")

    async def stop(self) -> None:
        """Jobs under way go back to the queue, for this node's next start or another."""
        if self._sweeping is not None:
            self._sweeping.cancel()
        if self._worker is not None:
            await self._worker.end()

    async def _run(self, ctx: Context, *, job_id: str) -> None:
        queued = ctx["job"]
        assert queued is not None
        beating = asyncio.create_task(self._heartbeat(queued), name=f"heartbeat-{job_id}")
        try:
            last_attempt = queued.attempts >= queued.retries
            await run_job(self._runtime, self.webhooks, job_id, last_attempt=last_attempt)
        finally:
            beating.cancel()

    async def _heartbeat(self, queued: QueuedJob) -> None:
        """Keep the job this worker's: a few reports a lease, whatever the job is doing."""
        while True:
            await asyncio.sleep(self._runtime.settings.job_lease_seconds / 4)
            try:
                await queued.update()
            except Exception as exc:  # the database away: the next beat may reach it
                logger.warning("job %s heartbeat failed: %r", queued.key, exc)
