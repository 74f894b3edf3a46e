"""The published interface descriptions: the native one matches the spec's paths, statuses
and Error schema; the OpenAI-compatible one documents /v1 in OpenAI's error shape; both
carry examples a user can send as they are."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from tests.helpers.app import Tenant, make_settings, running
from voice_service.app import create_app
from voice_service.inference.engines import Engines
from voice_service.openai_api.voices import OPENAI_NAMES

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
    # Issue 53: the transcription models a request may name.
    ("/models", "get"): {"200", "401", "403", "429"},
    # Issue 35: long recordings as jobs.
    ("/transcription-jobs", "post"): {"202", "400", "401", "403", "409", "413", "415", "429"},
    ("/transcription-jobs", "get"): {"200", "400", "401", "403", "429"},
    ("/transcription-jobs/{job_id}", "get"): {"200", "400", "401", "403", "404", "429"},
    ("/transcription-jobs/{job_id}", "delete"): {"200", "204", "401", "403", "404", "429"},
    ("/pronunciation-dictionaries/add-from-file", "post"): {
        "201",
        "400",
        "401",
        "403",
        "413",
        "429",
    },
    ("/pronunciation-dictionaries/add-from-rules", "post"): {"201", "400", "401", "403", "429"},
    ("/pronunciation-dictionaries", "get"): {"200", "400", "401", "403", "429"},
    ("/pronunciation-dictionaries/{dictionary_id}", "get"): {"200", "401", "403", "404", "429"},
    ("/pronunciation-dictionaries/{dictionary_id}", "patch"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "429",
    },
    ("/pronunciation-dictionaries/{dictionary_id}", "delete"): {
        "200",
        "401",
        "403",
        "404",
        "429",
    },
    ("/pronunciation-dictionaries/{dictionary_id}/add-rules", "post"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "429",
    },
    ("/pronunciation-dictionaries/{dictionary_id}/remove-rules", "post"): {
        "200",
        "400",
        "401",
        "403",
        "404",
        "429",
    },
    ("/pronunciation-dictionaries/{dictionary_id}/{version_id}/download", "get"): {
        "200",
        "401",
        "403",
        "404",
        "429",
    },
    ("/webhooks", "post"): {"201", "400", "401", "403", "429"},
    ("/webhooks", "get"): {"200", "401", "403", "429"},
    ("/webhooks/{webhook_id}", "get"): {"200", "401", "403", "404", "429"},
    ("/webhooks/{webhook_id}", "patch"): {"200", "400", "401", "403", "404", "429"},
    ("/webhooks/{webhook_id}", "delete"): {"204", "401", "403", "404", "429"},
    ("/webhooks/{webhook_id}/deliveries", "get"): {"200", "400", "401", "403", "404", "429"},
    ("/webhooks/signing-secret", "post"): {"201", "401", "403", "429"},
    ("/webhooks/signing-secret", "get"): {"200", "401", "403", "404", "429"},
    ("/transcription-jobs/{job_id}/deliveries", "get"): {"200", "401", "403", "404", "429"},
    ("/transcription-jobs/{job_id}/deliveries/{delivery_id}/redeliver", "post"): {
        "202",
        "401",
        "403",
        "404",
        "429",
    },
    ("/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver", "post"): {
        "202",
        "401",
        "403",
        "404",
        "429",
    },
}


# The OpenAI-compatible API's operations, in a document of their own (/v1/openapi.json),
# relative to /v1, and the statuses each answers (the same common ones; no 415: a file it
# does not take is OpenAI's 400). 409: a request with an Idempotency-Key still running.
OPENAI_OPERATIONS = {
    ("/audio/speech", "post"): {"200", "400", "401", "403", "404", "409", "429", "502"},
    ("/audio/transcriptions", "post"): {"200", "400", "401", "403", "409", "413", "429", "502"},
    ("/audio/translations", "post"): {"200", "400", "401", "403", "409", "413", "429", "502"},
    ("/models", "get"): {"200", "401", "403", "429"},
    ("/models/{model_id}", "get"): {"200", "401", "403", "404", "429"},
}
OPENAI_DOCUMENT = "http://testserver/v1/openapi.json"

# Spec section 7, and the codes beyond it (README: 408 for a request too slow, 409 for an
# Idempotency-Key in use): what each status's examples may show.
CODES = {
    400: {"INVALID_REQUEST"},
    401: {"INVALID_API_KEY"},
    403: {"ACCOUNT_SUSPENDED", "SERVICE_DISABLED"},
    404: {"NOT_FOUND"},
    408: {"INVALID_REQUEST"},
    409: {"IDEMPOTENCY_KEY_IN_USE"},
    413: {"PAYLOAD_TOO_LARGE"},
    415: {"UNSUPPORTED_MEDIA_TYPE"},
    429: {"RATE_LIMITED"},
    500: {"INTERNAL_ERROR"},
    502: {"PROVIDER_ERROR"},
}
# OpenAI's error types by status, which its SDKs choose their exception classes by.
OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
}


@pytest.fixture
async def document(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
async def openai_document(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get(OPENAI_DOCUMENT)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
async def voice_ids(client: httpx.AsyncClient, tenant: Tenant) -> set[str]:
    response = await client.get("/voices", headers=tenant.headers)
    assert response.status_code == 200
    return {voice["id"] for voice in response.json()["voices"]}


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def error_examples(document: dict[str, Any]) -> list[tuple[tuple[str, ...], int, Any]]:
    """Every error response's examples: (where, status, example); none may lack them."""
    found = []
    for path, method, operation in operations(document):
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                shown = examples_of(response["content"]["application/json"])
                assert shown, (path, method, status)
                found += [((path, method, status), int(status), example) for example in shown]
    return found


def speaks(path: str) -> bool:
    return "speech" in path and "speech-to-text" not in path


def examples_of(media: dict[str, Any]) -> list[Any]:
    """The examples a media type shows: its own, or its schema's."""
    named = [example["value"] for example in media.get("examples", {}).values()]
    return named or media["schema"].get("examples", [])


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


async def test_the_openai_compatible_operations_have_their_own_document(
    document: dict[str, Any], openai_document: dict[str, Any]
) -> None:
    """/v1 has another base and OpenAI's error shape: its own document, not the spec's."""
    assert openai_document["info"]["version"] == "1.0.0"
    assert openai_document["servers"] == [{"url": "/v1"}]
    declared = {(path, method) for path, method, _ in operations(openai_document)}
    assert declared == set(OPENAI_OPERATIONS)
    assert not [path for path in document["paths"] if path.startswith("/v1")]


@pytest.mark.parametrize(("path", "method"), sorted(OPENAI_OPERATIONS))
async def test_openai_statuses_are_declared_with_openai_error_shape(
    openai_document: dict[str, Any], path: str, method: str
) -> None:
    operation = openai_document["paths"][path][method]
    assert operation["tags"] == ["OpenAI-compatible"]
    assert operation["security"]
    responses = operation["responses"]
    assert OPENAI_OPERATIONS[(path, method)] <= set(responses)
    assert "422" not in responses and "415" not in responses
    for status, response in responses.items():
        assert "X-Request-ID" in response["headers"]
        if int(status) >= 400:
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/OpenAIError"}
    detail = openai_document["components"]["schemas"]["OpenAIErrorDetail"]
    assert set(detail["required"]) == {"message", "type", "param", "code"}


async def test_each_error_status_shows_its_own_codes(document: dict[str, Any]) -> None:
    """A 401's example says INVALID_API_KEY, a 404's NOT_FOUND: not the schema's first."""
    for where, status, example in error_examples(document):
        assert set(example["error"]) == {"code", "message", "request_id"}, where
        assert example["error"]["code"] in CODES[status], where


async def test_each_openai_error_status_shows_its_own_codes_in_openai_shape(
    openai_document: dict[str, Any],
) -> None:
    for where, status, example in error_examples(openai_document):
        error = example["error"]
        assert set(error) == {"message", "type", "param", "code"}, where
        assert error["code"].upper() in CODES[status], where
        assert error["type"] == OPENAI_TYPES.get(status, "invalid_request_error"), where


async def test_both_403_codes_are_shown(document: dict[str, Any]) -> None:
    forbidden = document["paths"]["/voices/clone"]["post"]["responses"]["403"]
    codes = {e["error"]["code"] for e in examples_of(forbidden["content"]["application/json"])}
    assert codes == {"ACCOUNT_SUSPENDED", "SERVICE_DISABLED"}


async def test_every_operation_taking_an_idempotency_key_declares_409(
    document: dict[str, Any], openai_document: dict[str, Any]
) -> None:
    taking = 0
    for path, method, operation in operations(document) + operations(openai_document):
        names = {parameter["name"] for parameter in operation.get("parameters", [])}
        if "Idempotency-Key" in names:
            taking += 1
            assert "409" in operation["responses"], (path, method)
    # Four speech routes, two transcription ones, a job's submission, clone; three of /v1.
    assert taking == 11


async def test_no_summary_shows_markdown(
    document: dict[str, Any], openai_document: dict[str, Any]
) -> None:
    """Swagger UI prints a summary as it is: a backtick would show."""
    for path, method, operation in operations(document) + operations(openai_document):
        assert operation["summary"], (path, method)
        assert "`" not in operation["summary"], (path, method)


async def test_json_bodies_show_examples_that_name_a_voice_and_fit_their_schema(
    document: dict[str, Any], openai_document: dict[str, Any], voice_ids: set[str]
) -> None:
    checked = 0
    for doc in (document, openai_document):
        for path, method, operation in operations(doc):
            media = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if media is None:
                continue
            shown = examples_of(media)
            assert shown, (path, method)
            validator = Draft202012Validator({**media["schema"], "components": doc["components"]})
            for example in shown:
                validator.validate(example)
                if not speaks(path):
                    continue  # a job's audio URL, a webhook's
                voice = example.get("voice_id") or example.get("voice")
                assert voice in voice_ids or voice in OPENAI_NAMES, (path, method, voice)
                checked += 1
    assert checked >= 6  # four speech routes; OpenAI's speech, with a name and with an id


async def test_json_body_examples_are_answered_as_they_are(
    client: httpx.AsyncClient,
    tenant: Tenant,
    document: dict[str, Any],
    openai_document: dict[str, Any],
) -> None:
    """What "Try it out" fills in is a request the service answers (200), not a 404: for
    speech (the others name URLs on the internet, which a test may not reach)."""
    for doc, base in (
        (document, "http://testserver/api/v1"),
        (openai_document, "http://testserver/v1"),
    ):
        for path, method, operation in operations(doc):
            if not speaks(path):
                continue
            media = operation.get("requestBody", {}).get("content", {}).get("application/json")
            for example in examples_of(media) if media else []:
                answer = await client.request(
                    method, f"{base}{path}", json=example, headers=tenant.headers
                )
                assert answer.status_code == 200, (path, example, answer.text[:200])
                assert answer.headers["content-type"].startswith(("audio/", "application/"))


async def test_path_parameters_show_examples_that_fit(
    document: dict[str, Any], openai_document: dict[str, Any], voice_ids: set[str]
) -> None:
    for path, method, operation in operations(document) + operations(openai_document):
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path":
                values = [example["value"] for example in parameter["examples"].values()]
                assert values, (path, method)
                for value in values:
                    Draft202012Validator(parameter["schema"]).validate(value)
    joe = document["paths"]["/voices/{id}"]["get"]["parameters"][0]["examples"]
    assert {example["value"] for example in joe.values()} <= voice_ids


async def test_form_fields_show_examples_that_fit(
    document: dict[str, Any], openai_document: dict[str, Any]
) -> None:
    forms = 0
    for path, method, operation in operations(document) + operations(openai_document):
        form = operation.get("requestBody", {}).get("content", {}).get("multipart/form-data")
        if form is None:
            continue
        forms += 1
        fields = form["schema"]["properties"]
        for name in {"name", "language", "model"} & set(fields):
            assert fields[name]["examples"], (path, method, name)
        for field in fields.values():
            for value in field.get("examples", []):
                Draft202012Validator(field).validate(value)
    # /speech-to-text, /asr, /transcription-jobs, /voices/clone, a PLS file; OpenAI's two
    assert forms == 7


async def test_docs_are_served_by_the_app_itself(client: httpx.AsyncClient) -> None:
    """/api/v1/docs works offline: every script and stylesheet it names is ours."""
    page = await client.get("/docs")
    assert page.status_code == 200
    assets = re.findall(r'(?:src="|<link[^>]* href=")([^"]+)"', page.text)
    assert len(assets) == 5
    for url in assets:
        assert url.startswith("/api/v1/docs/assets/"), url
        asset = await client.get(url.removeprefix("/api/v1"))
        assert asset.status_code == 200 and len(asset.content) > 100, url
    assert (await client.get("/docs/assets/..%2Fsettings.py")).status_code == 404
    assert "/docs" not in (await client.get("/openapi.json")).json()["paths"]


async def test_docs_link_both_documents_the_websocket_page_and_the_console(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/docs")).text
    links = set(re.findall(r'<a [^>]*href="([^"]+)"', page))
    assert links == {
        "/console/",
        "/api/v1/docs",
        "/api/v1/docs?api=openai",
        "/api/v1/docs/websockets",
    }
    urls = set(re.findall(r'data-openapi-url="([^"]+)"', page))
    assert urls == {"/api/v1/openapi.json", "/v1/openapi.json"}


async def test_the_websocket_page_lists_messages_close_codes_and_limits(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.get("/docs/websockets")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe" not in policy
    page = answer.text
    assert "<script" not in page and "style=" not in page  # the CSP allows neither inline
    for endpoint in (
        "/api/v1/text-to-speech/{voice_id}/stream-input",
        "/v1/realtime?intent=transcription",
        "/api/v1/speech-to-text/realtime",
    ):
        assert endpoint in page
    for message in (
        '{"text": ""}',
        '"flush": true',
        '"isFinal": true',
        "input_timeout_exceeded",
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.input_audio_transcription.failed",
        "session_idle",
    ):
        assert message in page, message
    for code in ("1000", "1008", "1011", "1012"):
        assert f"<td>{code}</td>" in page
    assert "$" not in page  # every placeholder filled


async def test_the_websocket_page_gives_this_nodes_limits(
    tmp_path: Path, database_url: str, engines: Engines
) -> None:
    settings = make_settings(
        tmp_path,
        database_url,
        realtime_idle_seconds=7.5,
        max_realtime_seconds=900,
        max_realtime_sessions_per_key=3,
    )
    async with running(create_app(settings, engines)) as client:
        page = " ".join((await client.get("/docs/websockets")).text.split())
    assert "<td>3; one more is refused (429) before the upgrade</td>" in page
    assert "<td>7.5 s ends the session" in page and "No text for 7.5 s" in page
    assert "<td>900 s</td>" in page
