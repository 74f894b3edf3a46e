"""End to end: `voice-service serve` as a user starts it, called over real HTTP."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import av
import httpx
import pytest

from voice_service.ids import catalogue_voice_id

CLI = [sys.executable, "-m", "voice_service"]


@dataclass(frozen=True)
class Server:
    base_url: str
    api_key: str
    org_id: str
    env: dict[str, str]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _read_json(stream: io.TextIOBase | None, deadline: float) -> dict[str, str]:
    assert stream is not None
    text = ""
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        text += line
        try:
            parsed: dict[str, str] = json.loads(text)
            return parsed
        except json.JSONDecodeError:
            continue
    raise AssertionError(f"serve printed no JSON: {text!r}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("serve")
    env = {
        **os.environ,
        "VOICE_SERVICE_DATA_DIR": str(data_dir),
        # Always the embedded default here: this is the README's first run.
        "VOICE_SERVICE_DATABASE_URL": f"sqlite+aiosqlite:///{data_dir / 'voice-service.db'}",
    }
    env.pop("VOICE_SERVICE_REDIS_URL", None)
    env.pop("VOICE_SERVICE_KEY_PEPPER", None)
    port = _free_port()
    process = subprocess.Popen(  # noqa: S603
        [*CLI, "serve", "--port", str(port), "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        first = _read_json(process.stdout, time.monotonic() + 60)
        root = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{root}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        else:
            raise AssertionError("the server never became ready")
        yield Server(first["base_url"], first["api_key"], first["org_id"], env)
    finally:
        process.terminate()
        process.wait(timeout=30)


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
            "text": "Hello from Voice Service.",
            "voice_id": catalogue_voice_id("piper:en_US-joe-medium"),
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
    root = server.base_url.removesuffix("/api/v1")
    assert httpx.get(f"{root}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{root}/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_schemathesis_finds_no_failures(server: Server, tmp_path: Path) -> None:
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
            f"{server.base_url}/openapi.json",
            "--header",
            f"Authorization: Bearer {key}",
            "--checks",
            "all",
            # Uploads are validated by content, which no JSON Schema can express: a
            # schema-valid random "file" is rightly a 415, declared in the document.
            "--exclude-checks",
            "positive_data_acceptance",
            "--max-examples",
            "60",
            "--max-response-time",
            "180",
            "--seed",
            "1",
            "--request-timeout",
            "60",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-6000:]
