"""One envelope and a request id for every error, framework errors included."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from tests.helpers.api import REQUEST_ID, assert_error
from tests.helpers.app import Tenant, Tenants, make_settings, running
from tests.helpers.voices import JOE
from voice_service.app import create_app
from voice_service.core.ids import catalogue_voice_id
from voice_service.core.models import RequestLogEntry
from voice_service.inference.engines import Engines
from voice_service.kit.db import create_engine

pytestmark = pytest.mark.anyio


async def test_success_carries_a_request_id(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.get("/voices", headers=tenant.headers)
    assert response.status_code == 200
    assert REQUEST_ID.match(response.headers["x-request-id"])


async def test_request_ids_are_unique(client: httpx.AsyncClient, tenant: Tenant) -> None:
    ids = {
        (await client.get("/voices", headers=tenant.headers)).headers["x-request-id"]
        for _ in range(5)
    }
    assert len(ids) == 5


async def test_client_cannot_choose_the_request_id(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    headers = {**tenant.headers, "X-Request-ID": "req_mine"}
    response = await client.get("/voices", headers=headers)
    assert response.headers["x-request-id"] != "req_mine"


async def test_unknown_route_is_not_found_envelope(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/no-such-thing"), 404, "NOT_FOUND")


async def test_unknown_route_outside_the_api_is_not_found_envelope(
    client: httpx.AsyncClient,
) -> None:
    assert_error(await client.get("http://testserver/elsewhere"), 404, "NOT_FOUND")


async def test_wrong_method_is_405_envelope_with_allow(client: httpx.AsyncClient) -> None:
    response = await client.put("/voices")
    assert_error(response, 405, "INVALID_REQUEST")
    assert "GET" in response.headers["allow"]


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        # Two routers declare this path's methods; Allow names them all.
        (f"/voices/{JOE}", "DELETE, GET"),
        # A voice id never matches "clone": this path has its POST alone.
        ("/voices/clone", "POST"),
    ],
)
async def test_allow_lists_exactly_the_methods_of_the_path(
    client: httpx.AsyncClient, tenant: Tenant, path: str, allowed: str
) -> None:
    response = await client.request("OPTIONS", path, headers=tenant.headers)
    assert_error(response, 405, "INVALID_REQUEST")
    assert response.headers["allow"] == allowed


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_the_clone_path_is_no_voice_of_the_callers_for_get_and_delete(
    client: httpx.AsyncClient, tenant: Tenant, method: str
) -> None:
    # As for any id that is no voice of the caller's: a status the OpenAPI document declares.
    response = await client.request(method, "/voices/clone", headers=tenant.headers)
    assert_error(response, 404, "NOT_FOUND")


async def test_bad_json_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/text-to-speech",
        headers={**tenant.headers, "Content-Type": "application/json"},
        content=b'{"text": "hi", "voice_id": ',
    )
    assert_error(response, 400, "INVALID_REQUEST")


@pytest.mark.parametrize(
    "path", ["/text-to-speech", "/webhooks", "http://testserver/v1/audio/speech"]
)
async def test_a_form_encoded_body_is_told_to_send_json(
    client: httpx.AsyncClient, tenant: Tenant, path: str
) -> None:
    """What curl -d sends without -H: the refusal names the Content-Type to send."""
    response = await client.post(path, headers=tenant.headers, data={"text": "hi"})
    message = response.json()["error"]["message"]
    assert response.status_code == 400 and "Content-Type: application/json" in message
    assert "application/x-www-form-urlencoded" in message
    sent_as_json = await client.post(
        path, headers={**tenant.headers, "Content-Type": "application/json"}, content=b"text=hi"
    )
    assert "Content-Type" not in sent_as_json.json()["error"]["message"]


@pytest.mark.parametrize(
    "payload",
    [
        {"text": 5, "voice_id": "voice_x"},
        {"text": "hi", "voice_id": ["voice_x"]},
        {"text": None, "voice_id": "voice_x"},
        ["text", "voice_id"],
        "just a string",
    ],
)
async def test_wrong_types_are_400_not_422(
    client: httpx.AsyncClient, tenant: Tenant, payload: object
) -> None:
    response = await client.post("/text-to-speech", headers=tenant.headers, json=payload)
    assert_error(response, 400, "INVALID_REQUEST")


async def test_validation_message_names_the_field(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await client.post(
        "/text-to-speech", headers=tenant.headers, json={"voice_id": "voice_x"}
    )
    assert "text" in assert_error(response, 400, "INVALID_REQUEST")["message"]


async def test_declared_oversized_body_is_413_before_reading(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    headers = {**tenant.headers, "Content-Length": str(26 * 1024 * 1024)}
    response = await client.post("/text-to-speech", headers=headers, content=b"{}")
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")


async def test_streamed_oversized_body_is_413(client: httpx.AsyncClient, tenant: Tenant) -> None:
    chunk = b"x" * (1024 * 1024)

    async def body():  # type: ignore[no-untyped-def]
        for _ in range(26):
            yield chunk

    response = await client.post("/text-to-speech", headers=tenant.headers, content=body())
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")


async def test_internal_failure_is_500_envelope_and_logged(
    tmp_path: Path, engines: Engines
) -> None:
    async with _own_database_app(tmp_path, engines) as (client, broken, tenant):
        response = await _fail_internally(client, broken, tenant)
        error = assert_error(response, 500, "INTERNAL_ERROR")
        assert "Traceback" not in response.text
        row = await broken.run(lambda s: s.get(RequestLogEntry, error["request_id"]))
        assert row is not None
        assert (row.status, row.error_code) == (500, "INTERNAL_ERROR")


@asynccontextmanager
async def _own_database_app(
    tmp_path: Path, engines: Engines
) -> AsyncIterator[tuple[httpx.AsyncClient, Tenants, Tenant]]:
    """The service on a SQLite database of the test's own, which it may then break."""
    settings = make_settings(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'broken.db'}")
    async with running(create_app(settings, engines)) as client:
        tenants = Tenants(settings)
        yield client, tenants, await tenants.create()


async def _fail_internally(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> httpx.Response:
    await tenants.run(lambda s: s.execute(text("DROP TABLE usage_records")))
    return await client.post(
        "/text-to-speech",
        headers=tenant.headers,
        json={"text": "Hi.", "voice_id": catalogue_voice_id("espeak:de")},
    )


async def test_every_error_body_is_serialized_the_same_way(
    tmp_path: Path, engines: Engines
) -> None:
    # A 400 from the handlers, a 413 and a 500 from the middleware: one serializer, so
    # byte for byte the same conventions (compact separators, UTF-8).
    async with _own_database_app(tmp_path, engines) as (client, tenants, tenant):
        invalid = await client.post("/text-to-speech", headers=tenant.headers, json={})
        too_large = await client.post(
            "/text-to-speech",
            headers={**tenant.headers, "Content-Length": str(26 * 1024 * 1024)},
            content=b"{}",
        )
        failed = await _fail_internally(client, tenants, tenant)
    for response, status in ((invalid, 400), (too_large, 413), (failed, 500)):
        assert response.status_code == status
        assert (
            response.content
            == json.dumps(response.json(), separators=(",", ":"), ensure_ascii=False).encode()
        )


async def test_trailing_slash_is_not_found_not_a_redirect(client: httpx.AsyncClient) -> None:
    # A redirect would echo the Host header back, before the key is even checked.
    response = await client.get(
        "http://evil.example.com/api/v1/voices/", headers={"Host": "evil.example.com"}
    )
    assert_error(response, 404, "NOT_FOUND")
    assert "location" not in response.headers


async def test_head_is_answered_like_get_without_a_body(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    get = await client.get("/voices", headers=tenant.headers)
    head = await client.head("/voices", headers=tenant.headers)
    assert head.status_code == get.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    assert head.headers["content-length"] == get.headers["content-length"]
    assert REQUEST_ID.match(head.headers["x-request-id"])


async def test_head_is_logged_as_head(client: httpx.AsyncClient, tenants: Tenants) -> None:
    response = await client.head("http://testserver/healthz")
    row = await tenants.run(lambda s: s.get(RequestLogEntry, response.headers["x-request-id"]))
    assert row is not None
    assert (row.method, row.path, row.status) == ("HEAD", "/healthz", 200)


async def test_sqlite_runs_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'wal.db'}")
    engine = create_engine(settings)
    try:
        async with engine.connect() as connection:
            mode = (await connection.execute(text("PRAGMA journal_mode"))).scalar()
            sync = (await connection.execute(text("PRAGMA synchronous"))).scalar()
    finally:
        await engine.dispose()
    assert (mode, sync) == ("wal", 2)  # 2 = FULL


async def test_a_parameter_named_twice_in_the_query_is_refused_before_any_work(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    # The route would take the last value; an Idempotency-Key's fingerprint sees both.
    response = await client.post(
        "/text-to-speech?output_format=mp3_44100_64&output_format=pcm_16000",
        headers=tenant.headers,
        json={"voice_id": JOE, "text": "Hi."},
    )
    error = assert_error(response, 400, "INVALID_REQUEST")
    assert "'output_format'" in error["message"]
    openai = await client.post(
        "http://testserver/v1/audio/speech?x=1&x=2",
        headers=tenant.headers,
        json={"model": "tts-1", "voice": "alloy", "input": "Hi."},
    )
    assert openai.status_code == 400
    assert openai.json()["error"]["param"] == "x"  # OpenAI's shape on its surface
    blank = await client.get("/voices?limit=&limit=5", headers=tenant.headers)
    assert assert_error(blank, 400, "INVALID_REQUEST")["message"].count("'limit'") == 1
