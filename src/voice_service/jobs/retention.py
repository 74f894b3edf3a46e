"""What jobs leave behind, removed by a background task on each node (every step is safe
on several nodes at once): jobs whose results are past keeping, with their audio; audio no
job names (a submission cut off between storing it and committing its job); and jobs the
queue gave up on while their row still says they run (killed on their last attempt)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from saq.job import Status

from voice_service.core.errors import InternalError
from voice_service.jobs import repository
from voice_service.jobs.runner import fail_job
from voice_service.jobs.service import AUDIO_PREFIX, drop_audio
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.runtime import Runtime

logger = logging.getLogger(__name__)

INTERVAL_SECONDS = 600.0
# Audio younger than this may belong to a submission still committing on another node.
ORPHAN_GRACE = timedelta(hours=1)
_GIVEN_UP = (Status.ABORTED, Status.FAILED, Status.COMPLETE)


async def sweep(runtime: Runtime, queue: SqlQueue, webhooks: SqlQueue) -> int:
    """One pass; returns how many jobs and files it removed or settled."""
    now = runtime.books.clock()
    done = 0
    async with runtime.sessions() as session:
        expired = await repository.expired_jobs(
            session, now - timedelta(days=runtime.settings.job_result_days)
        )
    for job in expired:
        async with transaction(runtime.sessions) as session:
            await repository.delete_job(session, job.id)
        await drop_audio(runtime, job)
        done += 1
    names = await runtime.blobs.file_names(AUDIO_PREFIX, now - ORPHAN_GRACE)
    async with runtime.sessions() as session:
        used = await repository.audio_in_use(session, names)
    for name in set(names) - used:
        await runtime.blobs.drop_file(name)
        done += 1
    async with runtime.sessions() as session:
        under_way = await repository.jobs_under_way(session)
    for job in under_way:
        queued = await queue.job(job.id)
        if queued is None or queued.status in _GIVEN_UP:
            message = "The job was interrupted too often; submit it again."
            done += await fail_job(runtime, webhooks, job, InternalError.code, message)
    return done


async def sweep_forever(runtime: Runtime, queue: SqlQueue, webhooks: SqlQueue) -> None:
    while True:
        try:
            removed = await sweep(runtime, queue, webhooks)
            if removed:
                logger.info("job sweep removed or settled %d", removed)
        except Exception as exc:  # the database away: the next pass tries again
            logger.warning("job sweep failed: %r", exc)
        await asyncio.sleep(INTERVAL_SECONDS)
