"""SAQ's queue in the service's own database (kit/job_queue.py), run by SAQ's own worker on
the suite's backend: jobs run once each, survive a restart, and a job whose worker was
killed runs again on another once its heartbeat lapses."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from saq import Worker
from saq.job import Job, Status

from tests.helpers.app import fresh_database, make_settings
from voice_service.kit.db import create_engine, migrate, session_factory
from voice_service.kit.job_queue import SqlQueue
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

Function = Callable[..., Awaitable[Any]]


class QuietWorker(Worker[Any]):
    SIGNALS = []  # noqa: RUF012 (SAQ's class attribute): the app owns the process's signals


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with fresh_database(tmp_path) as url:
        yield make_settings(tmp_path, url)


@asynccontextmanager
async def opened(settings: Settings) -> AsyncIterator[SqlQueue]:
    engine = create_engine(settings)
    await migrate(engine)
    try:
        yield SqlQueue(session_factory(engine), "tests", poll_seconds=0.05)
    finally:
        await engine.dispose()


@asynccontextmanager
async def working(
    queue: SqlQueue, functions: list[tuple[str, Function]], **options: Any
) -> AsyncIterator[Worker[Any]]:
    worker = QuietWorker(queue, functions=functions, poll_interval=0.05, **options)
    task = asyncio.create_task(worker.start())
    try:
        yield worker
    finally:
        await worker.stop()
        task.cancel()


async def settled(queue: SqlQueue, key: str, seconds: float = 60) -> Job:
    """The job once it has ended, as the database records it."""
    async with asyncio.timeout(seconds):
        while True:
            job = await queue.job(key)
            assert job is not None
            if job.status in (Status.COMPLETE, Status.FAILED, Status.ABORTED):
                return job
            await asyncio.sleep(0.05)


async def test_every_job_runs_once_on_two_workers(settings: Settings) -> None:
    runs: list[int] = []

    async def record(_ctx: Any, *, n: int) -> int:
        runs.append(n)
        return n * n

    async with opened(settings) as queue:
        keys = [f"job-{n}" for n in range(20)]
        for n, key in enumerate(keys):
            await queue.enqueue("record", key=key, n=n)
        assert await queue.count("queued") == 20
        async with (
            working(queue, [("record", record)], concurrency=3),
            working(queue, [("record", record)], concurrency=3),
        ):
            results = [await settled(queue, key) for key in keys]
    assert sorted(runs) == list(range(20))
    assert [job.result for job in results] == [n * n for n in range(20)]
    assert all(job.status is Status.COMPLETE and job.attempts == 1 for job in results)


async def test_a_key_already_queued_is_not_queued_twice(settings: Settings) -> None:
    async with opened(settings) as queue:
        assert await queue.enqueue("record", key="once", n=1) is not None
        assert await queue.enqueue("record", key="once", n=2) is None
        job = await queue.job("once")
    assert job is not None and job.kwargs == {"n": 1}


async def test_queued_jobs_outlive_a_restart(settings: Settings) -> None:
    async with opened(settings) as queue:
        await queue.enqueue("double", key="kept", n=21)

    async def double(_ctx: Any, *, n: int) -> int:
        return 2 * n

    async with opened(settings) as queue, working(queue, [("double", double)]):
        job = await settled(queue, "kept")
    assert (job.status, job.result) == (Status.COMPLETE, 42)


async def test_a_queued_job_aborted_never_runs(settings: Settings) -> None:
    ran: list[str] = []

    async def run(_ctx: Any) -> None:
        ran.append("ran")

    async with opened(settings) as queue:
        job = await queue.enqueue("run", key="stopped")
        assert job is not None
        await queue.abort(job, "cancelled")
        async with working(queue, [("run", run)]):
            await queue.enqueue("run", key="after")
            await settled(queue, "after")
        stopped = await queue.job("stopped")
    assert stopped is not None and stopped.status is Status.ABORTED
    assert ran == ["ran"]  # the later job only


async def test_a_job_whose_worker_was_killed_runs_again_on_another(
    settings: Settings, tmp_path: Path
) -> None:
    """The first worker is a process of its own, SIGKILLed while the job runs there; the
    job's heartbeat lapses, the second worker's sweep hands it on, and it completes once."""
    started = tmp_path / "started"
    script = textwrap.dedent(
        f"""
        import asyncio, pathlib
        from saq import Worker
        from voice_service.kit.db import create_engine, session_factory
        from voice_service.kit.job_queue import SqlQueue
        from voice_service.settings import Settings

        async def hang(ctx):
            pathlib.Path({str(started)!r}).touch()
            await asyncio.sleep(3600)

        async def main():
            settings = Settings(database_url={settings.resolved_database_url!r})
            queue = SqlQueue(session_factory(create_engine(settings)), "tests", poll_seconds=0.05)
            worker = Worker(queue, functions=[("work", hang)], poll_interval=0.05)
            await worker.start()

        asyncio.run(main())
        """
    )

    async def finish(_ctx: Any) -> str:
        return "done here"

    async with opened(settings) as queue:
        await queue.enqueue("work", key="orphan", heartbeat=2, retries=2, timeout=0)
        first = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
        try:
            async with asyncio.timeout(60):
                while not started.exists():  # noqa: ASYNC110 (another process's evidence)
                    await asyncio.sleep(0.05)
            running = await queue.job("orphan")
            assert running is not None and running.status is Status.ACTIVE
        finally:
            first.send_signal(signal.SIGKILL)
            await first.wait()
        async with working(queue, [("work", finish)], timers={"sweep": 1}):
            job = await settled(queue, "orphan")
    assert (job.status, job.result, job.attempts) == (Status.COMPLETE, "done here", 2)
