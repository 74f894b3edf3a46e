"""A job whose audio is named by URL: fetched from a real HTTP server on loopback (allowed
by the operator for the test), same-host redirects followed, another host's refused, and
every failure a 400 or 413 that says why; without the allowance, loopback is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.api import assert_error
from tests.helpers.app import Tenant, Tenants, make_settings, running
from tests.helpers.jobs import one_recording, settled, wav_bytes
from tests.helpers.loopback_http import http_server
from voice_service.api.transcription_jobs import MAX_JSON_BYTES
from voice_service.app import create_app
from voice_service.inference.engines import Engines
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

AUDIO = wav_bytes(one_recording())


@pytest.fixture(scope="module")
def files() -> Iterator[int]:
    """A file server on 127.0.0.1; its port."""

    def serve(_method: str, path: str, _h: dict[str, str], _b: bytes) -> Any:
        routes = {
            "/meeting.wav": (200, {}, AUDIO),
            "/moved": (302, {"Location": "/meeting.wav"}, b""),
            "/elsewhere": (302, {"Location": f"http://localhost:{port}/meeting.wav"}, b""),
            "/big": (200, {}, AUDIO * 3),
        }
        return routes.get(path, (404, {}, b"no such file"))

    with http_server(serve) as port:
        yield port


@pytest.fixture
def settings(tmp_path: Path, own_database: str) -> Settings:
    return make_settings(
        tmp_path,
        own_database,
        outbound_allowed_hosts="127.0.0.1",
        job_max_upload_bytes=len(AUDIO) * 2,
    )


async def by_url(client: httpx.AsyncClient, tenant: Tenant, url: str, **options: Any) -> Any:
    return await client.post(
        "/transcription-jobs", headers=tenant.headers, json={"url": url, **options}
    )


async def test_a_url_is_fetched_and_transcribed_as_an_upload_is(
    client: httpx.AsyncClient, tenant: Tenant, files: int
) -> None:
    root = f"http://127.0.0.1:{files}"
    direct = await by_url(client, tenant, f"{root}/meeting.wav", language="en")
    moved = await by_url(client, tenant, f"{root}/moved", timestamps="word")
    assert direct.status_code == moved.status_code == 202, (direct.text, moved.text)
    first = await settled(client, tenant, direct.json()["id"])
    second = await settled(client, tenant, moved.json()["id"])
    assert first["status"] == second["status"] == "completed"
    assert first["result"]["text"] == second["result"]["text"] != ""
    assert second["timestamps"] == "word"


async def test_every_failure_to_fetch_says_why(
    client: httpx.AsyncClient, tenant: Tenant, files: int
) -> None:
    root = f"http://127.0.0.1:{files}"
    for path, status, code, words in (
        ("/elsewhere", 400, "INVALID_REQUEST", "another host"),
        ("/missing", 400, "INVALID_REQUEST", "answered 404"),
        ("/big", 413, "PAYLOAD_TOO_LARGE", "limit"),
    ):
        error = assert_error(await by_url(client, tenant, root + path), status, code)
        assert words in error["message"], error
    bad = await client.post(
        "/transcription-jobs", headers=tenant.headers, json={"url": 7, "keep_audio": "maybe"}
    )
    assert_error(bad, 400, "INVALID_REQUEST")
    huge = await client.post(
        "/transcription-jobs",
        headers={**tenant.headers, "Content-Type": "application/json"},
        content=b'{"url": "' + b"a" * MAX_JSON_BYTES + b'"}',
    )
    assert_error(huge, 413, "PAYLOAD_TOO_LARGE")
    assert (await client.get("/transcription-jobs", headers=tenant.headers)).json()["jobs"] == []


async def test_loopback_is_refused_unless_the_operator_allows_it(
    settings: Settings, engines: Engines, files: int
) -> None:
    closed = settings.model_copy(update={"outbound_allowed_hosts": ""})
    tenant = await Tenants(closed).create()
    async with running(create_app(closed, engines)) as client:
        for url in (
            f"http://127.0.0.1:{files}/meeting.wav",
            f"https://127.0.0.1:{files}/meeting.wav",
            f"https://localhost:{files}/meeting.wav",
            f"https://[::1]:{files}/meeting.wav",
        ):
            assert_error(await by_url(client, tenant, url), 400, "INVALID_REQUEST")
