"""Clients that stop reading or hang up, over raw sockets against `voice-service serve` with
one inference worker: a stream whose client reads nothing holds no worker and is cut off
after the send timeout, unbilled; a request whose client left before its answer is logged
499, billed nothing, and its inference stopped (or never started).

What happened is read from the server itself: its request log, usage rows, /readyz queues
and /metrics. Deadlines are generous bounds for a loaded machine."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers.servers import Server, running_server
from tests.helpers.waiting import eventually
from tests.helpers.wav import silent_wav

SEND_TIMEOUT_SECONDS = 15
# About five minutes of speech: no stream gets near its end in these tests.
LONG_TEXT = ("This sentence is one of many that make a long text. " * 95)[:4900]
WHOLE_PCM_BYTES = 2 * 24000 * 300  # 16-bit samples at 24 kHz


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("hung-up"),
        pool_size="1",
        send_timeout_seconds=str(SEND_TIMEOUT_SECONDS),
    ) as running:
        yield running


def new_key(server: Server) -> tuple[str, str]:
    """A key of an organization of its own: each test's rows are told apart by key."""
    org = server.cli("orgs", "create", "Tenant")
    key = server.cli("keys", "create", org["id"])
    return key["id"], key["secret"]


def send_request(
    server: Server, path: str, secret: str, content_type: str, body: bytes
) -> socket.socket:
    """A request sent whole, on a socket whose receive buffer is small (4 kB), so that a
    client that reads nothing fills it at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(60)
    sock.connect(server.address)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {server.address[0]}\r\n"
        f"Authorization: Bearer {secret}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def speech_request(server: Server, secret: str, path: str, body: dict[str, str]) -> socket.socket:
    return send_request(server, path, secret, "application/json", json.dumps(body).encode())


def queue(server: Server, capability: str) -> dict[str, int]:
    queues: dict[str, dict[str, int]] = httpx.get(f"{server.root}/readyz").json()["queues"]
    return queues[capability]


def metric(server: Server, name: str, label: str) -> float:
    """A counter's value in /metrics (0 before its first increment)."""
    text = httpx.get(f"{server.root}/metrics").text
    match = re.search(rf"^{re.escape(name)}{{{re.escape(label)}}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def posts_of(server: Server, key_id: str) -> list[dict[str, object]]:
    rows = server.query("SELECT * FROM request_log WHERE key_id = ? AND method = 'POST'", key_id)
    return [dict(row) for row in rows]


def billed(server: Server, key_id: str) -> int:
    return len(server.query("SELECT * FROM usage_records WHERE key_id = ?", key_id))


def test_clients_that_read_nothing_hold_no_worker_and_are_cut_off_unbilled(
    server: Server,
) -> None:
    attacker_id, attacker = new_key(server)
    _, other = new_key(server)
    body = {"model": "tts-1", "voice": "alloy", "input": LONG_TEXT, "response_format": "pcm"}
    readers = [speech_request(server, attacker, "/v1/audio/speech", body) for _ in range(2)]
    try:
        for sock in readers:  # each stream has begun (its head is here); nothing is read
            sock.recv(1, socket.MSG_PEEK)
        # Both streams are stuck on their clients, and no speech holds or waits for the
        # node's one worker.
        assert eventually(lambda: queue(server, "text-to-speech") == {"waiting": 0, "running": 0})
        served = httpx.post(
            f"{server.base_url}/text-to-speech",
            headers={"Authorization": f"Bearer {other}"},
            json={"text": "Hi.", "voice_id": piper_voice(server, other)},
            timeout=60,
        )
        assert served.status_code == 200
        # Served while both streams were still open: their rows are written when they end.
        assert posts_of(server, attacker_id) == []
        assert eventually(lambda: len(posts_of(server, attacker_id)) == 2)
    finally:
        for sock in readers:
            sock.close()
    for row in posts_of(server, attacker_id):
        assert (row["status"], row["error_code"]) == (499, "CLIENT_CLOSED_REQUEST")
        # What the buffers took (the server bounds its socket's), far short of the whole.
        assert 0 < int(str(row["bytes_sent"])) < WHOLE_PCM_BYTES // 10
    assert billed(server, attacker_id) == 0


def test_clients_that_hang_up_before_their_answer_are_not_billed(server: Server) -> None:
    speaker_id, speaker = new_key(server)
    listener_id, listener = new_key(server)
    spoken_before = metric(
        server, "voice_service_audio_seconds_total", 'capability="text-to-speech"'
    )
    transcriptions_before = metric(
        server, "voice_service_inference_seconds_count", 'engine="whisper"'
    )
    voice = piper_voice(server, speaker)
    speaking = speech_request(
        server, speaker, "/api/v1/text-to-speech", {"text": LONG_TEXT, "voice_id": voice}
    )
    assert eventually(lambda: queue(server, "text-to-speech")["running"] == 1)
    boundary = "hung-up-boundary"
    upload = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            "Content-Type: audio/wav\r\n\r\n"
        ).encode()
        + silent_wav(16000, 16000)
        + f"\r\n--{boundary}--\r\n".encode()
    )
    listening = send_request(
        server,
        "/api/v1/speech-to-text",
        listener,
        f"multipart/form-data; boundary={boundary}",
        upload,
    )
    # The speech goes on a chunk at a time, ahead of the transcription, which waits.
    assert eventually(lambda: queue(server, "speech-to-text")["waiting"] == 1)
    listening.close()
    assert eventually(lambda: len(posts_of(server, listener_id)) == 1)
    speaking.close()
    assert eventually(lambda: len(posts_of(server, speaker_id)) == 1)

    for key_id in (speaker_id, listener_id):
        (row,) = posts_of(server, key_id)
        assert (row["status"], row["error_code"]) == (499, "CLIENT_CLOSED_REQUEST")
        assert billed(server, key_id) == 0
    # The transcription never ran, and the speech stopped at its next chunk: far short of
    # the text's five minutes.
    assert (
        metric(server, "voice_service_inference_seconds_count", 'engine="whisper"')
        == transcriptions_before
    )
    spoken = (
        metric(server, "voice_service_audio_seconds_total", 'capability="text-to-speech"')
        - spoken_before
    )
    assert spoken < 120, spoken


def piper_voice(server: Server, secret: str) -> str:
    voices = httpx.get(
        f"{server.base_url}/voices", headers={"Authorization": f"Bearer {secret}"}
    ).json()["voices"]
    return str(next(v["id"] for v in voices if "Joe" in v["name"]))
