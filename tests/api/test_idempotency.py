"""Idempotency-Key, with Stripe's semantics: a retry gets the first answer again, billed
once and logged every time; another request under the same key is refused; errors are
not kept; a retry racing its first request, on another node too, waits and replays it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.api import assert_error, speak, usage_units
from tests.helpers.app import Tenant, Tenants, fresh_database, make_settings, running
from tests.helpers.dbfaults import refusing_log_rows
from tests.helpers.voices import JOE
from tests.helpers.wav import silent_wav
from voice_service.app import create_app
from voice_service.books.idempotency.expiry import remove_expired
from voice_service.books.idempotency.repository import LEASE
from voice_service.core.models import IdempotencyEntry, RequestLogEntry, utcnow
from voice_service.inference.engines import Engines
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

ROOT = "http://testserver"


def keyed(tenant: Tenant, key: str) -> dict[str, str]:
    return {**tenant.headers, "Idempotency-Key": key}


async def tts(
    client: httpx.AsyncClient, tenant: Tenant, key: str, text: str = "Hello there."
) -> httpx.Response:
    return await client.post(
        "/text-to-speech", headers=keyed(tenant, key), json={"text": text, "voice_id": JOE}
    )


async def replayed_flags(tenants: Tenants, request_ids: list[str]) -> list[bool]:
    async def read(session: AsyncSession) -> dict[str, bool]:
        rows = await session.scalars(
            select(RequestLogEntry).where(RequestLogEntry.request_id.in_(request_ids))
        )
        return {row.request_id: row.replayed for row in rows}

    flags = await tenants.run(read)
    return [flags[request_id] for request_id in request_ids]


async def test_a_retry_gets_the_same_audio_billed_once_and_logged_twice(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    first = await tts(client, tenant, "order-1")
    again = await tts(client, tenant, "order-1")
    assert first.status_code == again.status_code == 200
    assert again.content == first.content and again.headers["content-type"] == "audio/mpeg"
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["X-Request-ID"] != first.headers["X-Request-ID"]
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 12)]
    ids = [first.headers["X-Request-ID"], again.headers["X-Request-ID"]]
    assert await replayed_flags(tenants, ids) == [False, True]
    logged = (await client.get(f"/requests/{ids[1]}", headers=tenant.headers)).json()
    assert (logged["status"], logged["replayed"]) == (200, True)


async def test_the_same_key_with_another_request_is_refused(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    assert (await tts(client, tenant, "order-2", "One.")).status_code == 200
    other_text = await tts(client, tenant, "order-2", "Two.")
    error = assert_error(other_text, 400, "INVALID_REQUEST")
    assert "Idempotency-Key" in error["message"] and "different request" in error["message"]
    other_path = await client.post(
        "/text-to-speech/stream",
        headers=keyed(tenant, "order-2"),
        json={"text": "One.", "voice_id": JOE},
    )
    assert_error(other_path, 400, "INVALID_REQUEST")
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 4)]


async def test_keys_belong_to_their_organization(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    other = await tenants.create()
    assert (await tts(client, tenant, "shared-name")).status_code == 200
    theirs = await tts(client, other, "shared-name", "Another text.")
    assert theirs.status_code == 200 and "Idempotent-Replayed" not in theirs.headers
    assert await usage_units(tenants, other.org_id) == [("text-to-speech", 13)]


async def test_client_errors_are_kept_and_replayed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    body = {"text": "Hello.", "voice_id": "voice_nope"}
    first = await client.post("/text-to-speech", headers=keyed(tenant, "bad-voice"), json=body)
    again = await client.post("/text-to-speech", headers=keyed(tenant, "bad-voice"), json=body)
    assert_error(first, 404, "NOT_FOUND")
    assert again.status_code == 404 and again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    row = await tenants.run(lambda s: s.get(RequestLogEntry, again.headers["X-Request-ID"]))
    assert row is not None and (row.error_code, row.replayed) == ("NOT_FOUND", True)


@pytest.mark.parametrize("key", ["", "x" * 256, "clé", "tab\there"])
async def test_a_malformed_key_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, key: str
) -> None:
    response = await client.post(
        "/text-to-speech",
        headers=[*tenant.headers.items(), ("Idempotency-Key", key.encode())],
        json={"text": "Hi", "voice_id": JOE},
    )
    assert "Idempotency-Key" in assert_error(response, 400, "INVALID_REQUEST")["message"]


async def test_streams_and_uploads_replay_and_a_fresh_boundary_is_the_same_request(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    body = {"text": "Streamed once.", "voice_id": JOE}
    streamed = [
        await client.post("/text-to-speech/stream", headers=keyed(tenant, "stream"), json=body)
        for _ in range(2)
    ]
    assert streamed[1].content == streamed[0].content and len(streamed[0].content) > 1000
    wav = silent_wav(16000, 16000)
    # httpx draws a new multipart boundary for each request, as SDKs retrying do.
    heard = [
        await client.post(
            "/speech-to-text",
            headers=keyed(tenant, "upload"),
            files={"file": ("a.wav", wav, "audio/wav")},
            data={"language": "en"},
        )
        for _ in range(2)
    ]
    assert heard[0].status_code == 200 and heard[1].headers["Idempotent-Replayed"] == "true"
    assert heard[1].json() == heard[0].json()
    other_file = await client.post(
        "/speech-to-text",
        headers=keyed(tenant, "upload"),
        files={"file": ("a.wav", silent_wav(16001, 16000), "audio/wav")},
        data={"language": "en"},
    )
    assert_error(other_file, 400, "INVALID_REQUEST")
    assert sorted(await usage_units(tenants, tenant.org_id)) == [
        ("speech-to-text", 1),
        ("text-to-speech", 14),
    ]


async def test_openai_speech_replays(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    body = {"model": "tts-1", "voice": "alloy", "input": "Hi there", "response_format": "wav"}
    answers = [
        await client.post(ROOT + "/v1/audio/speech", headers=keyed(tenant, "sdk-1"), json=body)
        for _ in range(2)
    ]
    assert answers[1].content == answers[0].content
    assert answers[1].headers["content-type"] == answers[0].headers["content-type"]
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 8)]


@pytest.fixture
async def second_node(settings: Settings, engines: Engines) -> AsyncIterator[httpx.AsyncClient]:
    async with running(create_app(settings, engines)) as client:
        yield client


async def test_a_retry_racing_its_first_request_on_another_node_waits_and_replays(
    client: httpx.AsyncClient, second_node: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    text = "A longer sentence, so that the first request is still speaking."
    answers = await asyncio.gather(
        *(tts(node, tenant, "race", text) for node in (client, second_node) * 2)
    )
    assert {answer.status_code for answer in answers} == {200}
    assert len({answer.content for answer in answers}) == 1
    assert sorted("Idempotent-Replayed" in a.headers for a in answers) == [False, True, True, True]
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", len(text))]


async def test_a_key_outlives_a_restart(
    tmp_path: Path, own_database: str, engines: Engines
) -> None:
    settings = make_settings(tmp_path, own_database)
    tenants = Tenants(settings)
    async with running(create_app(settings, engines)) as client:
        tenant = await tenants.create()
        first = await tts(client, tenant, "before-restart")
    async with running(create_app(settings, engines)) as client:
        again = await tts(client, tenant, "before-restart")
    assert again.headers["Idempotent-Replayed"] == "true" and again.content == first.content
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 12)]


async def test_an_expired_key_runs_again_and_expired_entries_are_removed(
    tmp_path: Path, own_database: str, engines: Engines
) -> None:
    settings = make_settings(tmp_path, own_database)
    tenants = Tenants(settings)
    app = create_app(settings, engines)
    async with running(app) as client:
        tenant = await tenants.create()
        context = app.state.context
        assert (await tts(client, tenant, "daily")).status_code == 200
        tomorrow = utcnow() + timedelta(hours=24, seconds=1)
        context.books.clock = lambda: tomorrow
        again = await tts(client, tenant, "daily")
        assert again.status_code == 200 and "Idempotent-Replayed" not in again.headers
        assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 12)] * 2

        assert (await tts(client, tenant, "one-off")).status_code == 200
        assert await remove_expired(context.sessions, context.blobs, lambda: tomorrow) == 0
        later = tomorrow + timedelta(hours=24, seconds=1)
        assert await remove_expired(context.sessions, context.blobs, lambda: later) == 2
        assert await entries(tenants, tenant) == 0


async def test_a_run_whose_node_died_after_billing_runs_again_unbilled(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    text = "Hello there."
    first = await tts(client, tenant, "crash", text)
    assert first.status_code == 200

    async def as_if_it_died_before_keeping_the_answer(session: AsyncSession) -> None:
        entry = await session.get(IdempotencyEntry, (tenant.org_id, "crash"))
        assert entry is not None
        entry.done, entry.body, entry.status = False, None, None
        entry.lease_until = utcnow() - LEASE

    await tenants.run(as_if_it_died_before_keeping_the_answer)
    rerun = await tts(client, tenant, "crash", text)
    assert rerun.status_code == 200 and "Idempotent-Replayed" not in rerun.headers
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 12)]
    replay = await tts(client, tenant, "crash", text)
    assert replay.headers["Idempotent-Replayed"] == "true" and replay.content == rerun.content


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[str]:
    with fresh_database(tmp_path) as url:  # the trigger must not reach the shared database
        yield url


async def test_a_failed_request_is_not_kept_and_its_retry_runs(
    tmp_path: Path, own_database: str, engines: Engines
) -> None:
    settings = make_settings(tmp_path, own_database)
    tenants = Tenants(settings)
    async with running(create_app(settings, engines)) as client:
        tenant = await tenants.create()
        async with refusing_log_rows(tenants, "NEW.status < 300"):
            failed = await tts(client, tenant, "retry-me")
        assert_error(failed, 500, "INTERNAL_ERROR")
        retried = await tts(client, tenant, "retry-me")
        assert retried.status_code == 200 and "Idempotent-Replayed" not in retried.headers
        assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 12)]


async def test_requests_without_a_key_are_unaffected(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    for _ in range(2):
        assert (await speak(client, tenant, "Hello.")).status_code == 200
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 6)] * 2
    assert await entries(tenants, tenant) == 0


async def entries(tenants: Tenants, tenant: Tenant) -> int:
    count = await tenants.run(
        lambda s: s.scalar(
            select(func.count())
            .select_from(IdempotencyEntry)
            .where(IdempotencyEntry.org_id == tenant.org_id)
        )
    )
    return int(count or 0)
