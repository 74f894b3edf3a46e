"""The published interface description matches the spec's paths, statuses and Error schema."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.anyio

# Spec section 4: every operation and the error statuses it lists (plus the 413, 500 and
# 403 that any authenticated route can answer).
OPERATIONS = {
    ("/text-to-speech", "post"): {"200", "400", "401", "403", "404", "429", "502"},
    ("/speech-to-text", "post"): {"200", "400", "401", "403", "413", "415", "429", "502"},
    ("/asr", "post"): {"200", "400", "401", "403", "413", "415", "429", "502"},
    ("/voices", "get"): {"200", "401", "403", "429"},
    ("/voices/clone", "post"): {"201", "400", "401", "403", "413", "415", "429", "502"},
    ("/voices/{id}", "delete"): {"200", "401", "403", "404", "429"},
    # Issue 23: one voice by id.
    ("/voices/{id}", "get"): {"200", "401", "403", "404", "429"},
    # Issue 10: the customer's own usage and request log.
    ("/usage", "get"): {"200", "400", "401", "403", "429"},
    ("/requests", "get"): {"200", "400", "401", "403", "429"},
    ("/requests/{request_id}", "get"): {"200", "401", "403", "404", "429"},
    # Issue 11: speech streamed as it is synthesized.
    ("/text-to-speech/stream", "post"): {"200", "400", "401", "403", "404", "429", "502"},
    # Issue 26: when each character is spoken, whole or streamed.
    ("/text-to-speech/with-timestamps", "post"): {"200", "400", "401", "403", "404", "429", "502"},
    ("/text-to-speech/with-timestamps/stream", "post"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "429",
        "502",
    },
}


@pytest.fixture
async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def test_version_and_base_path(document: dict[str, Any]) -> None:
    assert document["info"]["version"] == "1.0.0"
    assert document["servers"] == [{"url": "/api/v1"}]


async def test_every_spec_operation_is_declared(document: dict[str, Any]) -> None:
    declared = {(path, method) for path, item in document["paths"].items() for method in item}
    assert declared == set(OPERATIONS)


@pytest.mark.parametrize(("path", "method"), sorted(OPERATIONS))
async def test_statuses_are_declared_with_the_error_schema(
    document: dict[str, Any], path: str, method: str
) -> None:
    responses = document["paths"][path][method]["responses"]
    assert OPERATIONS[(path, method)] <= set(responses)
    assert "422" not in responses
    for status, response in responses.items():
        assert "X-Request-ID" in response["headers"]
        if int(status) >= 400:
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/Error"}


@pytest.mark.parametrize(("path", "method"), sorted(OPERATIONS))
async def test_every_operation_needs_the_bearer_key(
    document: dict[str, Any], path: str, method: str
) -> None:
    scheme = next(iter(document["components"]["securitySchemes"].values()))
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert document["paths"][path][method]["security"]


async def test_error_schema_is_the_envelope(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["Error"]["required"] == ["error"]
    detail = schemas[schemas["Error"]["properties"]["error"]["$ref"].rsplit("/", 1)[1]]
    assert set(detail["required"]) == {"code", "message", "request_id"}


async def test_resources_carry_the_spec_names_and_formats(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["Voice"]["properties"]["created_at"]["format"] == "date-time"
    assert schemas["Voice"]["properties"]["type"]["enum"] == ["PROVIDER", "CLONED"]
    assert set(schemas["Transcript"]["required"]) == {"text", "language", "request_id"}


async def test_docs_are_served_by_the_app_itself(client: httpx.AsyncClient) -> None:
    """/api/v1/docs works offline: every script and stylesheet it names is ours."""
    page = await client.get("/docs")
    assert page.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert len(assets) == 4
    for url in assets:
        assert url.startswith("/api/v1/docs/assets/"), url
        asset = await client.get(url.removeprefix("/api/v1"))
        assert asset.status_code == 200 and len(asset.content) > 100, url
    assert (await client.get("/docs/assets/..%2Fsettings.py")).status_code == 404
    assert "/docs" not in (await client.get("/openapi.json")).json()["paths"]
