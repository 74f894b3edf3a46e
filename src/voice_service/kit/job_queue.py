"""SAQ's job queue, stored in this service's own database (SQLite or PostgreSQL).

SAQ brings the worker, retries with backoff, timeouts, heartbeats, aborts and the sweep that
hands a stuck job (its node killed, its heartbeat lapsed) to another worker. SAQ stores its
queue in Redis or, through psycopg, in PostgreSQL; neither reaches the embedded default, and
Redis may keep nothing on disk. So this is SAQ's `Queue` interface over the database every
node already shares, through SQLAlchemy: one code path for SQLite and PostgreSQL, its rows
migrated with the rest (`queue_jobs`, `queue_workers`). It polls; a claim is one conditional
UPDATE, so of two workers that see the same job exactly one gets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, cast

from saq import Worker
from saq.job import Job, Status
from saq.queue import Queue
from saq.types import Context, CountKind, QueueInfo, WorkerInfo, WorkerStats
from saq.utils import now, now_seconds
from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.core.models import QueueJob, QueueWorker
from voice_service.kit.db import insert_if_absent, transaction

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # how often an idle worker looks for a job
# What an unreachable or silent database raises (sockets, timeouts, the pool).
_OUTAGES = (OSError, TimeoutError, OperationalError, InterfaceError, PoolTimeout)
# Statuses as stored: SAQ's words.
_TERMINAL = (Status.ABORTED.value, Status.COMPLETE.value, Status.FAILED.value)
_RUNNING = (Status.ACTIVE.value, Status.ABORTING.value)


class InAppWorker(Worker[Context]):
    """SAQ's worker, run inside the app as a task of its own (`begin`, `end`): the app owns
    the process's signals."""

    SIGNALS = []  # noqa: RUF012 (SAQ's class attribute)

    def begin(self, name: str) -> None:
        self._running = asyncio.create_task(self.start(), name=name)

    async def end(self) -> None:
        """Stop: jobs under way are cancelled and go back to the queue."""
        await self.stop()
        self._running.cancel()
        try:
            await self._running
        except asyncio.CancelledError:
            pass
        except Exception:  # it had died on its own: say so, and let the app stop
            logger.exception("job queue worker %s had stopped", self._running.get_name())


class _Outage:
    """SAQ's worker asks the queue something every second or so, and logs a traceback for
    each failure: while the database is away, one line says so instead, and one when it is
    back."""

    def __init__(self) -> None:
        self.ongoing = False

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        try:
            yield
        except _OUTAGES as exc:
            if not self.ongoing:
                logger.warning("the job queue cannot reach the database: %r", exc)
            self.ongoing = True
            raise _Unavailable() from exc
        if self.ongoing:
            logger.warning("the job queue reaches the database again")
            self.ongoing = False


class _Unavailable(Exception):
    """The database did not answer the queue this time."""


class SqlQueue(Queue):
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        name: str = "default",
        *,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        super().__init__(name, dump=None, load=None)
        self._sessions = sessions
        self._poll_seconds = poll_seconds
        self._outage = _Outage()

    async def disconnect(self) -> None:
        pass  # the sessions belong to the app

    async def info(self, jobs: bool = False, offset: int = 0, limit: int = 10) -> QueueInfo:
        async with self._sessions() as session:
            workers = await session.scalars(
                select(QueueWorker).where(
                    QueueWorker.queue_key == self.name, QueueWorker.expire_at > now_seconds()
                )
            )
            queued = await self.count("queued")
            active = await self.count("active")
            listed: list[dict[str, Any]] = []
            if jobs:
                rows = await session.execute(
                    select(QueueJob.job, QueueJob.status)
                    .where(self._here(), QueueJob.status.not_in(_TERMINAL))
                    .order_by(QueueJob.scheduled, QueueJob.key)
                    .offset(offset)
                    .limit(limit)
                )
                listed = [job.to_dict() for job in (self.deserialize(*row) for row in rows) if job]
            return {
                "workers": {
                    worker.worker_id: {
                        "queue_key": worker.queue_key,
                        "stats": cast(WorkerStats | None, worker.stats),
                        "metadata": worker.meta,
                    }
                    for worker in workers
                },
                "name": self.name,
                "queued": queued,
                "active": active,
                "scheduled": 0,
                "jobs": listed,
            }

    async def count(self, kind: CountKind) -> int:
        statuses = {
            "queued": (Status.QUEUED.value,),
            "active": (Status.ACTIVE.value,),
            "incomplete": ("new", "queued", "active", "aborting"),
        }[kind]
        async with self._sessions() as session:
            counted = await session.scalar(
                select(func.count())
                .select_from(QueueJob)
                .where(self._here(), QueueJob.status.in_(statuses))
            )
        return counted or 0

    async def sweep(self, lock: int = 60, abort: float = 5.0) -> list[str]:
        """Remove expired jobs and workers; retry (or abort) each job that is stuck: past
        its timeout, or its heartbeat lapsed because its worker died."""
        try:
            with self._outage.quiet():
                return await self._sweep(abort)
        except _Unavailable:
            return []

    async def _sweep(self, abort: float) -> list[str]:
        moment = now_seconds()
        async with transaction(self._sessions) as session:
            await session.execute(
                delete(QueueJob).where(
                    self._here(), QueueJob.status.in_(_TERMINAL), QueueJob.expire_at <= moment
                )
            )
            await session.execute(delete(QueueWorker).where(QueueWorker.expire_at <= moment))
            rows = (
                await session.execute(
                    select(QueueJob.job, QueueJob.status).where(
                        self._here(), QueueJob.status.in_(_RUNNING)
                    )
                )
            ).all()
        swept = []
        for payload, status in rows:
            job = self.deserialize(payload, status)
            if job is None or not job.stuck or not await self._take_stuck(job, payload):
                continue
            swept.append(job.key)
            logger.info("Sweeping %s", job.info(logger.isEnabledFor(logging.DEBUG)))
            try:  # a worker still alive sees the abort and stops the job
                await job.refresh(abort)
            except TimeoutError:
                logger.info("Could not abort job %s", job.key)
            if job.retryable:
                await self.retry(job, error=self.swept_error_message)
            else:
                await self.finish(job, Status.ABORTED, error=self.swept_error_message)
        return swept

    async def _take_stuck(self, job: Job, payload: str) -> bool:
        """Mark a stuck job aborting, unless another sweeper (or its worker) changed it
        since it was read: one sweeper retries it."""
        job.status = Status.ABORTING
        job.error = self.swept_error_message
        async with transaction(self._sessions) as session:
            taken = await session.execute(
                update(QueueJob)
                .where(QueueJob.key == job.key, QueueJob.job == payload)
                .values(job=self.serialize(job), status=Status.ABORTING.value)
            )
        return bool(taken.rowcount)  # type: ignore[attr-defined]

    async def _update(self, job: Job, status: Status | None = None, **kwargs: Any) -> None:
        expire_at = kwargs.pop("expire_at", -1)
        async with transaction(self._sessions) as session:
            await self._write(session, job, status, expire_at)

    async def _write(
        self, session: AsyncSession, job: Job, status: Status | None, expire_at: float | None
    ) -> None:
        if status is None:
            status = (
                await session.scalar(select(QueueJob.status).where(QueueJob.key == job.key))
                or job.status
            )
        job.status = status
        values: dict[str, Any] = {
            "job": self.serialize(job),
            "status": Status(job.status).value,
            "scheduled": job.scheduled,
        }
        if expire_at != -1:
            values["expire_at"] = expire_at
        await session.execute(update(QueueJob).where(QueueJob.key == job.key).values(**values))

    async def job(self, job_key: str) -> Job | None:
        async with self._sessions() as session:
            row = (
                await session.execute(
                    select(QueueJob.job, QueueJob.status).where(
                        self._here(), QueueJob.key == job_key
                    )
                )
            ).first()
        return self.deserialize(*row) if row else None

    async def jobs(self, job_keys: Iterable[str]) -> list[Job | None]:
        keys = list(job_keys)
        try:
            with self._outage.quiet():
                return await self._jobs(keys)
        except _Unavailable:
            return [None] * len(keys)

    async def _jobs(self, keys: list[str]) -> list[Job | None]:
        async with self._sessions() as session:
            rows = await session.execute(
                select(QueueJob.key, QueueJob.job, QueueJob.status).where(
                    self._here(), QueueJob.key.in_(keys)
                )
            )
            found = {key: (payload, status) for key, payload, status in rows}
        return [self.deserialize(*found[key]) if key in found else None for key in keys]

    async def iter_jobs(
        self, statuses: Sequence[Status] = tuple(Status), batch_size: int = 100
    ) -> AsyncIterator[Job]:
        last_key = ""
        while True:
            async with self._sessions() as session:
                rows = (
                    await session.execute(
                        select(QueueJob.key, QueueJob.job, QueueJob.status)
                        .where(
                            self._here(),
                            QueueJob.status.in_([Status(status).value for status in statuses]),
                            QueueJob.key > last_key,
                        )
                        .order_by(QueueJob.key)
                        .limit(batch_size)
                    )
                ).all()
            if not rows:
                return
            for key, payload, status in rows:
                last_key = key
                job = self.deserialize(payload, status)
                if job is not None:
                    yield job

    async def abort(self, job: Job, error: str, ttl: float = 5) -> None:
        async with self._sessions() as session:
            status = await session.scalar(select(QueueJob.status).where(QueueJob.key == job.key))
        if status is None or status == Status.QUEUED.value:
            await self.finish(job, Status.ABORTED, error=error)
        else:
            await self.update(job, status=Status.ABORTING, error=error)

    async def dequeue(self, timeout: float = 0.0, poll_interval: float = 0.0) -> Job | None:
        """The next queued job, claimed for this worker; None once `timeout` (0: none)
        has passed without one."""
        pause = poll_interval or self._poll_seconds
        give_up = now_seconds() + timeout if timeout > 0 else None
        while True:
            try:
                with self._outage.quiet():
                    job = await self._claim()
            except _Unavailable:
                job = None
            if job is not None:
                return job
            if give_up is not None and now_seconds() >= give_up:
                return None
            await asyncio.sleep(pause)

    async def _claim(self) -> Job | None:
        async with transaction(self._sessions) as session:
            candidates = (
                select(QueueJob.key)
                .where(
                    self._here(),
                    QueueJob.status == Status.QUEUED.value,
                    QueueJob.scheduled <= now_seconds(),
                )
                .order_by(QueueJob.priority, QueueJob.scheduled, QueueJob.key)
                .limit(8)
            )
            if session.get_bind().dialect.name == "postgresql":
                candidates = candidates.with_for_update(skip_locked=True)
            for key in (await session.scalars(candidates)).all():
                claimed = await session.execute(
                    update(QueueJob)
                    .where(QueueJob.key == key, QueueJob.status == Status.QUEUED.value)
                    .values(status=Status.ACTIVE.value)
                    .returning(QueueJob.job)
                )
                payload = claimed.scalar_one_or_none()
                if payload is None:
                    continue  # another worker took it
                job = self.deserialize(payload, Status.ACTIVE)
                assert job is not None
                job.started = job.touched = now()
                await self._write(session, job, Status.ACTIVE, -1)
                return job
        return None

    async def write_worker_info(self, worker_id: str, info: WorkerInfo, ttl: int) -> None:
        with contextlib.suppress(_Unavailable), self._outage.quiet():
            await self._write_worker_info(worker_id, info, ttl)

    async def _write_worker_info(self, worker_id: str, info: WorkerInfo, ttl: int) -> None:
        values = {
            "queue_key": info["queue_key"],
            "stats": info["stats"],
            "meta": info["metadata"],
            "expire_at": now_seconds() + ttl,
        }
        async with transaction(self._sessions) as session:
            dialect = session.get_bind().dialect
            added = await session.execute(
                insert_if_absent(dialect, QueueWorker).values(worker_id=worker_id, **values)
            )
            if not added.rowcount:  # type: ignore[attr-defined]
                await session.execute(
                    update(QueueWorker).where(QueueWorker.worker_id == worker_id).values(**values)
                )

    async def _retry(self, job: Job, error: str | None) -> None:
        delay = job.next_retry_delay()
        scheduled = now_seconds() + delay if delay else job.scheduled or now_seconds()
        await self.update(job, status=Status.QUEUED, scheduled=int(scheduled), expire_at=None)

    async def _finish(
        self, job: Job, status: Status, *, result: Any = None, error: str | None = None
    ) -> None:
        if job.ttl >= 0:
            expire_at = now_seconds() + job.ttl if job.ttl > 0 else None
            await self.update(job, status=status, expire_at=expire_at)
            return
        async with transaction(self._sessions) as session:
            await session.execute(delete(QueueJob).where(QueueJob.key == job.key))

    async def _enqueue(self, job: Job) -> Job | None:
        async with transaction(self._sessions) as session:
            added = await self._insert(session, job)
        if added:
            logger.info("Enqueuing %s", job.info(logger.isEnabledFor(logging.DEBUG)))
        return job if added else None

    async def enqueue_in(self, session: AsyncSession, job: Job) -> bool:
        """`enqueue`, in the caller's transaction: the job exists if and only if what it
        works on commits with it. False if a job of its key is already under way."""
        job.queue = self
        job.queued = now()
        job.status = Status.QUEUED
        await self._before_enqueue(job)
        return await self._insert(session, job)

    async def _insert(self, session: AsyncSession, job: Job) -> bool:
        """Add the job; a job of the same key is replaced only once it has ended."""
        scheduled = job.scheduled or int(now_seconds())
        values = {
            "queue": self.name,
            "job": self.serialize(job),
            "status": Status(job.status).value,
            "priority": job.priority,
            "scheduled": scheduled,
        }
        dialect = session.get_bind().dialect
        added = await session.execute(
            insert_if_absent(dialect, QueueJob).values(key=job.key, **values)
        )
        if added.rowcount:  # type: ignore[attr-defined]
            return True
        replaced = await session.execute(
            update(QueueJob)
            .where(
                QueueJob.key == job.key,
                QueueJob.status.in_(_TERMINAL),
                QueueJob.scheduled < scheduled,
            )
            .values(expire_at=None, **values)
        )
        return bool(replaced.rowcount)  # type: ignore[attr-defined]

    def serialize(self, job: Job) -> str:
        return str(super().serialize(job))

    def _here(self) -> ColumnElement[bool]:
        return QueueJob.queue == self.name
