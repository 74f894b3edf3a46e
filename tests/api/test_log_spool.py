"""Request-log rows the database refuses wait in a local spool and are replayed in order,
once each, when it takes them again, by the same process or the next one to start.

The database refuses rows through a trigger: a real failure of the real database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.helpers.app import Tenants, fresh_database, make_settings, running
from tests.helpers.dbfaults import refusing_log_rows
from voice_service.app import create_app
from voice_service.books.requestlog.repository import LogEntry
from voice_service.books.requestlog.spool import LogSpool, SpoolFull
from voice_service.core.models import RequestLogEntry
from voice_service.inference.engines import Engines
from voice_service.kit.workdir import LOCK_FILE, SPOOL_FILE, UPLOADS_DIR
from voice_service.settings import Settings
from voice_service.web.context import AppContext

REPLAY_WAIT_SECONDS = 60  # a bound for a loaded machine; the writer retries every second


def _entry(n: int) -> LogEntry:
    created_at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=n)
    return LogEntry(
        f"req_spool{n:04d}", None, None, "GET", f"/n/{n}", 404, "NOT_FOUND", 1, created_at
    )


def test_spool_hands_back_rows_in_order_and_empties_once_replayed(tmp_path: Path) -> None:
    spool = LogSpool(tmp_path / "spool", max_bytes=1 << 20)
    spool.append([_entry(0), _entry(1)])
    spool.append([_entry(2)])
    first, end = spool.unreplayed(limit=2)
    assert first == [_entry(0), _entry(1)]
    spool.replayed(end)
    assert spool.pending
    rest, end = spool.unreplayed(limit=10)
    assert rest == [_entry(2)]
    spool.replayed(end)
    assert not spool.pending
    assert (tmp_path / "spool").stat().st_size == 0


def test_full_spool_refuses_a_batch_whole(tmp_path: Path) -> None:
    spool = LogSpool(tmp_path / "spool", max_bytes=1024)
    with pytest.raises(SpoolFull):
        spool.append([_entry(n) for n in range(100)])
    assert not spool.pending
    assert not (tmp_path / "spool").exists()


def test_adopting_a_crashed_spool_drops_its_torn_last_line(tmp_path: Path) -> None:
    crashed = LogSpool(tmp_path / "crashed", max_bytes=1 << 20)
    crashed.append([_entry(0), _entry(1)])
    whole = (tmp_path / "crashed").read_bytes()
    (tmp_path / "crashed").write_bytes(whole[:-10])  # the crash cut the last write short
    spool = LogSpool(tmp_path / "spool", max_bytes=1 << 20)
    spool.adopt(tmp_path / "crashed")
    spool.append([_entry(2)])
    entries, _ = spool.unreplayed(limit=10)
    assert entries == [_entry(0), _entry(2)]


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[str]:
    with fresh_database(tmp_path) as url:
        yield url


@pytest.fixture
def settings(tmp_path: Path, own_database: str) -> Settings:
    return make_settings(tmp_path, own_database)


async def _request_ids(client: httpx.AsyncClient, count: int) -> list[str]:
    ids = []
    for n in range(count):  # one after the other: their order is the log's order
        response = await client.get(f"/no-such-route/{n}")
        assert response.status_code == 404
        ids.append(response.headers["x-request-id"])
    return ids


async def _wait_for_rows(tenants: Tenants, ids: list[str]) -> list[RequestLogEntry]:
    async def rows() -> list[RequestLogEntry]:
        found = await tenants.run(
            lambda s: s.scalars(
                select(RequestLogEntry)
                .where(RequestLogEntry.request_id.in_(ids))
                .order_by(RequestLogEntry.created_at)
            )
        )
        return list(found)

    async with asyncio.timeout(REPLAY_WAIT_SECONDS):
        while True:
            found = await rows()
            if len(found) == len(ids):
                return found
            await asyncio.sleep(0.2)


@pytest.mark.anyio
async def test_rows_the_database_refuses_are_answered_spooled_and_replayed_in_order(
    settings: Settings, engines: Engines
) -> None:
    tenants = Tenants(settings)
    app = create_app(settings, engines)
    async with running(app) as client:
        async with refusing_log_rows(tenants):
            ids = await _request_ids(client, 5)
            ready = await client.get("http://testserver/readyz")
            assert any("spool" in warning for warning in ready.json()["warnings"])
            assert await tenants.run(lambda s: s.get(RequestLogEntry, ids[0])) is None
        rows = await _wait_for_rows(tenants, ids)
    assert [row.request_id for row in rows] == ids
    assert [row.status for row in rows] == [404] * 5


@pytest.mark.anyio
async def test_the_next_process_replays_a_spool_and_clears_what_a_dead_one_left(
    settings: Settings, engines: Engines
) -> None:
    tenants = Tenants(settings)
    async with refusing_log_rows(tenants), running(create_app(settings, engines)) as client:
        stopped_with = await _request_ids(client, 3)
    # The process stopped while the database refused its rows: they stay in its spool.
    # A process killed outright: its directory unlocked, a spool and an upload inside.
    dead = settings.data_dir / "run" / "12345-dead"
    (dead / UPLOADS_DIR).mkdir(parents=True)
    (dead / LOCK_FILE).touch()
    (dead / UPLOADS_DIR / "upload-abc").write_bytes(b"half an upload")
    LogSpool(dead / SPOOL_FILE, max_bytes=1 << 20).append([_entry(7)])

    app = create_app(settings, engines)
    async with running(app):
        rows = await _wait_for_rows(tenants, [*stopped_with, _entry(7).request_id])
        assert not dead.exists()
        assert _context(app).workdir is not None
        assert [p.name for p in (settings.data_dir / "run").iterdir()] == [
            _context(app).workdir.path.name  # type: ignore[union-attr]
        ]
    assert sorted(row.request_id for row in rows) == sorted([*stopped_with, "req_spool0007"])


def _context(app: FastAPI) -> AppContext:
    context: AppContext = app.state.context
    return context
