"""Errors on /v1 come in OpenAI's shape, so OpenAI's SDK raises its own classes for them."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from tests.helpers.live import LiveServer
from voice_service.tenancy import service as tenancy


def sdk(live: LiveServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.root}/v1", api_key=key, max_retries=0)


def speak(client: openai.OpenAI, **overrides: object) -> bytes:
    arguments: dict[str, object] = {"model": "tts-1", "voice": "alloy", "input": "Hi."}
    arguments.update(overrides)
    return client.audio.speech.create(**arguments).content  # type: ignore[arg-type]


def assert_shape(error: openai.APIStatusError, kind: str, code: str) -> None:
    body = error.body
    assert isinstance(body, dict)  # the SDK unwraps {"error": {...}}
    assert set(body) == {"message", "type", "param", "code"}
    assert (body["type"], body["code"]) == (kind, code)
    assert error.response.headers["x-request-id"].startswith("req_")


def test_a_bad_key_is_authentication_error(live: LiveServer) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        sdk(live, "vs_" + "x" * 40).models.list()
    assert_shape(caught.value, "authentication_error", "invalid_api_key")


def test_a_suspended_org_and_a_disabled_service_are_permission_denied(live: LiveServer) -> None:
    tenant = live.tenant()
    client = sdk(live, tenant.secret)

    asyncio.run(
        live.tenants.run(
            lambda s: tenancy.set_service_enabled(s, "org", tenant.org_id, "text-to-speech", False)
        )
    )
    with pytest.raises(openai.PermissionDeniedError) as caught:
        speak(client)
    assert_shape(caught.value, "permission_error", "service_disabled")
    asyncio.run(
        live.tenants.run(lambda s: tenancy.set_status(s, "org", tenant.org_id, tenancy.SUSPENDED))
    )
    with pytest.raises(openai.PermissionDeniedError) as caught:
        client.models.list()
    assert_shape(caught.value, "permission_error", "account_suspended")


def test_unknown_voice_and_model_are_not_found(live: LiveServer) -> None:
    client = sdk(live, live.tenant().secret)
    with pytest.raises(openai.NotFoundError) as caught:
        speak(client, voice="voice_000000000000000000000000")
    assert_shape(caught.value, "not_found_error", "not_found")
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-17")


@pytest.mark.parametrize(
    ("overrides", "param"),
    [
        ({"speed": 9.0}, "speed"),
        ({"input": ""}, "input"),
        ({"input": "x" * 5001}, "input"),
        ({"response_format": "ogg"}, "response_format"),
        ({"stream_format": "chunks"}, "stream_format"),
    ],
)
def test_invalid_speech_requests_are_bad_request_naming_the_field(
    live: LiveServer, overrides: dict[str, object], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        speak(sdk(live, live.tenant().secret), **overrides)
    assert_shape(caught.value, "invalid_request_error", "invalid_request")
    assert caught.value.body["param"] == param  # type: ignore[index]


def test_invalid_transcription_fields_are_bad_request(live: LiveServer) -> None:
    client = sdk(live, live.tenant().secret)
    with pytest.raises(openai.BadRequestError) as caught:
        client.audio.transcriptions.create(
            model="whisper-1", file=("a.txt", b"not audio at all"), response_format="json"
        )
    # OpenAI's own answer to a file it does not take: 400, "Invalid file format. ...".
    assert_shape(caught.value, "invalid_request_error", "invalid_request")
    assert caught.value.body["param"] == "file"  # type: ignore[index]
    assert caught.value.body["message"].startswith("Invalid file format. Supported formats: [")  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad:
        client.audio.transcriptions.create(
            model="whisper-1",
            file=("a.txt", b"x"),
            response_format="docx",  # type: ignore[arg-type]
        )
    assert bad.value.body["param"] == "response_format"  # type: ignore[index]


def test_the_rate_limit_is_rate_limit_error_with_retry_after(live: LiveServer) -> None:
    client = sdk(live, live.tenant(rate_limit=1).secret)
    client.models.list()
    with pytest.raises(openai.RateLimitError) as caught:
        client.models.list()
    assert_shape(caught.value, "rate_limit_error", "rate_limited")
    assert int(caught.value.response.headers["retry-after"]) >= 1


def test_an_unknown_route_under_v1_is_openai_shaped(live: LiveServer) -> None:
    response = httpx.get(f"{live.root}/v1/audio/nothing", timeout=30)
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"
