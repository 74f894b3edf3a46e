"""End to end: `voice-service serve` as a user starts it, called over real HTTP."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import av
import httpx
import pytest

from tests.helpers.servers import CLI, Server, running_server
from tests.helpers.voices import JOE


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # A deadline no loaded machine reaches: outcomes must not depend on the machine's speed.
    # Kokoro is left out: schemathesis sends the longest valid texts to voices it finds in
    # GET /voices, and 5,000 characters take Kokoro (RTF about 0.5 on an idle core, eight
    # times Piper's) many minutes on a loaded 2-core machine. What is tested here is the HTTP
    # contract, the same for every engine; tests/api and tests/engines speak through Kokoro.
    with running_server(
        tmp_path_factory.mktemp("serve"),
        inference_timeout_seconds="3600",
        tts_engines="piper,espeak",
    ) as started:
        yield started


def test_first_start_prints_a_working_key(server: Server) -> None:
    assert server.base_url.endswith("/api/v1")
    response = httpx.get(
        f"{server.base_url}/voices", headers={"Authorization": f"Bearer {server.api_key}"}
    )
    assert response.status_code == 200
    assert response.headers["x-request-id"].startswith("req_")


def test_text_to_speech_over_http_returns_mp3(server: Server) -> None:
    response = httpx.post(
        f"{server.base_url}/text-to-speech",
        headers={"Authorization": f"Bearer {server.api_key}"},
        json={
            "text": "Welcome to Voice Service.",
            "voice_id": JOE,
        },
        timeout=60,
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/mpeg"
    with av.open(io.BytesIO(response.content)) as container:
        assert container.format.name == "mp3"
        assert container.streams.audio[0].codec_context.channels == 1


def test_chunked_oversized_body_is_cut_off_with_413(server: Server) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(40):
            yield b"x" * (1024 * 1024)

    try:
        response = httpx.post(
            f"{server.base_url}/text-to-speech",
            headers={"Authorization": f"Bearer {server.api_key}"},
            content=chunks(),
            timeout=60,
        )
    except httpx.TransportError:
        pytest.fail("the server dropped the connection instead of answering 413")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_health_endpoints_need_no_key(server: Server) -> None:
    root = server.root
    assert httpx.get(f"{root}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{root}/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


@pytest.mark.parametrize("document", ["/api/v1/openapi.json", "/v1/openapi.json"])
def test_schemathesis_finds_no_failures(server: Server, tmp_path: Path, document: str) -> None:
    created = subprocess.run(  # noqa: S603
        [*CLI, "keys", "create", server.org_id, "--rate-limit", "1000000", "--json"],
        env=server.env,
        capture_output=True,
        text=True,
        check=True,
    )
    key = json.loads(created.stdout)["secret"]
    result = subprocess.run(  # noqa: S603
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "run",
            f"{server.root}{document}",
            "--header",
            f"Authorization: Bearer {key}",
            "--checks",
            "all",
            # Stateful too: it follows the document's links (a clone, then GET and DELETE
            # of it), so every status a sequence of calls meets must be declared.
            "--phases",
            "examples,coverage,fuzzing,stateful",
            # Uploads are validated by content, which no JSON Schema can express: a
            # schema-valid random "file" is rightly a 415, declared in the document.
            "--exclude-checks",
            "positive_data_acceptance",
            # What names a URL the service would resolve and reach (a job's audio, a
            # webhook's receiver): generated names would send DNS queries off this machine.
            # tests/jobs and tests/webhooks cover them, on loopback.
            "--exclude-name",
            "POST /transcription-jobs",
            "--exclude-name",
            "POST /webhooks",
            "--exclude-name",
            "PATCH /webhooks/{webhook_id}",
            "--max-examples",
            "60",
            # The longest valid texts are slow by nature: 5,000 digits read one by one are
            # six minutes of speech, about a minute of synthesis on a loaded 2-core machine.
            "--max-response-time",
            "400",
            "--seed",
            "1",
            "--request-timeout",
            "400",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    # Long generated values (5,000 characters) would hide the report: shorten their runs.
    assert result.returncode == 0, re.sub(r"(.)\1{40,}", r"\1…", result.stdout)[-8000:]
