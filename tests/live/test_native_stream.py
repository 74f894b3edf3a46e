"""POST /api/v1/text-to-speech/stream: chunked MP3, billed once when all of it went out."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.helpers.app import make_settings
from tests.helpers.live import LiveServer, audio_duration, serving
from tests.helpers.voices import JOE
from tests.helpers.waiting import eventually
from voice_service.inference.engines import Engines

PARAGRAPH = (
    "Streaming starts playing at once. Each sentence is sent when it is spoken. "
    "The listener hears the first while the rest is made."
)


def stream(live: LiveServer, secret: str, text: str, voice_id: str = JOE) -> httpx.Response:
    return httpx.post(
        f"{live.root}/api/v1/text-to-speech/stream",
        json={"text": text, "voice_id": voice_id},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=120,
    )


def test_a_stream_is_chunked_mp3_billed_once_with_its_bytes_logged(live: LiveServer) -> None:
    tenant = live.tenant()
    response = stream(live, tenant.secret, PARAGRAPH)
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/mpeg"
    assert response.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in response.headers
    codec, _, seconds = audio_duration(response.content)
    assert codec == "mp3float" and seconds > 4.0
    request_id = response.headers["x-request-id"]
    row = live.log_row(request_id)
    assert (row.status, row.error_code, row.bytes_sent) == (200, None, len(response.content))
    assert live.usage_units(request_id) == [len(PARAGRAPH)]


def test_a_client_that_leaves_after_the_first_chunk_is_not_billed(live: LiveServer) -> None:
    tenant = live.tenant()
    long_text = " ".join(f"This is sentence number {n} of a very long text." for n in range(99))
    with (
        httpx.Client(timeout=120) as client,
        client.stream(
            "POST",
            f"{live.root}/api/v1/text-to-speech/stream",
            json={"text": long_text, "voice_id": JOE},
            headers=tenant.headers,
        ) as response,
    ):
        assert response.status_code == 200
        request_id = response.headers["x-request-id"]
        first = next(response.iter_raw())
        assert first
    # The client has closed the connection; the server stops, logs it, bills nothing.
    row = live.log_row(request_id)
    assert (row.status, row.error_code) == (499, "CLIENT_CLOSED_REQUEST")
    assert row.bytes_sent is not None and len(first) <= row.bytes_sent < 100_000
    assert live.usage_units(request_id) == []
    assert eventually(lambda: live.pool_in_use() == 0, 30), "the worker was not freed"
    spoken = [event for event in live.log.of(request_id) if "spoke chunk" in event]
    assert len(spoken) < 99  # synthesis stopped well before the end of the text


def test_a_stream_that_fails_midway_is_cut_off_logged_502_and_not_billed(
    engines: Engines, database_url: str, tmp_path: Path
) -> None:
    # Every inference may take 4 s whatever it speaks: the first chunk (about 0.1 s of
    # work) goes out, and the 5,000 characters (about 20 s of work) are stopped midway.
    settings = make_settings(
        tmp_path, database_url, inference_timeout_seconds=4.0, inference_timeout_per_audio_second=0
    )
    text = ("The keeper climbed the stairs and lit the lamp. " * 105)[:5000]
    with serving(settings, engines) as server:
        tenant = server.tenant()
        received = []
        with (
            httpx.Client(timeout=120) as client,
            client.stream(
                "POST",
                f"{server.root}/api/v1/text-to-speech/stream",
                json={"text": text, "voice_id": JOE},
                headers=tenant.headers,
            ) as response,
        ):
            assert response.status_code == 200
            request_id = response.headers["x-request-id"]
            with pytest.raises(httpx.RemoteProtocolError):  # no final chunk: cut off
                received.extend(response.iter_raw())
        row = server.log_row(request_id)
        assert (row.status, row.error_code) == (502, "PROVIDER_ERROR")
        assert row.bytes_sent is not None and row.bytes_sent > 0
        assert server.usage_units(request_id) == []
        assert eventually(lambda: server.pool_in_use() == 0, 30)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": "Hello.", "voice_id": "voice_000000000000000000000000"}, 404, "NOT_FOUND"),
        ({"text": "", "voice_id": JOE}, 400, "INVALID_REQUEST"),
    ],
)
def test_errors_before_the_first_byte_have_their_status_and_envelope(
    live: LiveServer, body: dict[str, str], status: int, code: str
) -> None:
    tenant = live.tenant()
    response = httpx.post(
        f"{live.root}/api/v1/text-to-speech/stream", json=body, headers=tenant.headers, timeout=60
    )
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert live.log_row(response.headers["x-request-id"]).status == status


def test_the_stream_is_in_the_openapi_document(live: LiveServer) -> None:
    document = httpx.get(f"{live.root}/api/v1/openapi.json", timeout=30).json()
    operation = document["paths"]["/text-to-speech/stream"]["post"]  # under servers /api/v1
    assert "audio/mpeg" in operation["responses"]["200"]["content"]
    assert not any(path.startswith(("/v1/", "/audio/")) for path in document["paths"])
