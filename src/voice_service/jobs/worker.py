"""This process's share of the job queue: SAQ's worker over the service's own database
(`kit.job_queue`), running `JOB_WORKERS` jobs at once. Every node that runs one takes jobs
from the same queue; a job whose node died is taken over once its heartbeat lapses."""

from __future__ import annotations

import asyncio
import contextlib

from saq import Worker
from saq.types import Context, PartialTimersDict

from voice_service.jobs.runner import run_job
from voice_service.jobs.service import QUEUE_NAME, RUN
from voice_service.kit.job_queue import SqlQueue
from voice_service.runtime import Runtime

# How often the queue looks for stuck jobs (a dead node's) and for aborts.
SWEEP_SECONDS = 30


class _Worker(Worker[Context]):
    SIGNALS = []  # noqa: RUF012 (SAQ's class attribute): the app owns the process's signals


class JobWorkers:
    def __init__(self, runtime: Runtime) -> None:
        self.queue = SqlQueue(runtime.sessions, QUEUE_NAME)
        self._runtime = runtime
        self._worker: _Worker | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        count = self._runtime.settings.job_workers
        if count == 0:
            return
        self._worker = _Worker(
            self.queue,
            functions=[(RUN, self._run)],
            concurrency=count,
            timers=PartialTimersDict(schedule=1, worker_info=10, sweep=SWEEP_SECONDS, abort=1),
        )
        self._task = asyncio.create_task(self._worker.start(), name="job-worker")

    async def stop(self) -> None:
        """Jobs under way go back to the queue, for this node's next start or another."""
        if self._worker is not None:
            await self._worker.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self, ctx: Context, *, job_id: str) -> None:
        queued = ctx["job"]
        assert queued is not None

        async def touch() -> None:  # the heartbeat that keeps the job this worker's
            await queued.update()

        await run_job(self._runtime, job_id, touch, last_attempt=queued.attempts >= queued.retries)
