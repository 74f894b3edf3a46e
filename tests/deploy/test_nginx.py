"""The nginx configuration the operations guide ships (deploy/nginx/voice-service.conf), run
by Debian's nginx in front of a node: speech streams through it, WebSockets (live
transcription, text streamed in) upgrade through it, an upload past the node's limit is
refused by nginx in the service's error envelope, and the node logs each client by the
address nginx saw, believing X-Forwarded-For from nginx alone."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest
from bench.nginx import nginx_in_front
from bench.wer import word_errors
from websockets.sync.client import connect

from tests.helpers.servers import Server, running_server
from tests.helpers.voices import JOE
from tests.helpers.waiting import eventually

SAID = "Please read me my last order."
SPOOFED = "203.0.113.7"  # TEST-NET-3: an address no test sends to


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("behind-nginx"), log_format="json") as server:
        yield server


@pytest.fixture(scope="module")
def proxy(node: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with nginx_in_front(tmp_path_factory.mktemp("nginx"), node.address[1]) as root:
        yield root


def _client(root: str, source: str) -> httpx.Client:
    """A client calling from `source`, an address of the loopback network."""
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=root, transport=transport, timeout=120)


def _logged_client(node: Server, request_id: str) -> object:
    """The client address of the request's log line, once written (a stream writes it as the
    stream ends on the node, which may be after the client has read the last byte)."""

    def logged() -> object:
        for line in node.log.read_text().split("\n")[:-1]:  # whole lines only
            if line.startswith("{"):
                fields = json.loads(line)
                if fields.get("request_id") == request_id:
                    return fields["client"]
        return None

    client = eventually(logged, 30)
    assert client is not None, f"no log line for {request_id}"
    return client


def _auth(node: Server) -> dict[str, str]:
    return {"Authorization": f"Bearer {node.api_key}"}


def test_speech_streams_through_and_the_node_logs_the_clients_own_address(
    node: Server, proxy: str
) -> None:
    with _client(proxy, "127.0.0.5") as client:
        body = {"text": SAID, "voice_id": JOE}
        with client.stream(
            "POST", "/api/v1/text-to-speech/stream", headers=_auth(node), json=body
        ) as streamed:
            assert streamed.status_code == 200
            assert streamed.headers["content-type"] == "audio/mpeg"
            audio = b"".join(streamed.iter_bytes())
        assert len(audio) > 5_000
        # A client's own X-Forwarded-For is kept behind the address nginx saw, and the node
        # believes only the last hop its trusted proxy added.
        spoofing = {**_auth(node), "X-Forwarded-For": SPOOFED}
        listed = client.get("/api/v1/voices", headers=spoofing)
        assert listed.status_code == 200
    assert _logged_client(node, streamed.headers["x-request-id"]) == "127.0.0.5"
    assert _logged_client(node, listed.headers["x-request-id"]) == "127.0.0.5"


def test_x_forwarded_for_is_believed_from_the_proxys_address_alone(node: Server) -> None:
    spoofing = {**_auth(node), "X-Forwarded-For": SPOOFED}
    with _client(node.root, "127.0.0.6") as stranger:
        ignored = stranger.get("/api/v1/voices", headers=spoofing)
    # 127.0.0.1 is VOICE_SERVICE_FORWARDED_ALLOW_IPS' default: a proxy on the node's host.
    with _client(node.root, "127.0.0.1") as same_host_proxy:
        believed = same_host_proxy.get("/api/v1/voices", headers=spoofing)
    assert (ignored.status_code, believed.status_code) == (200, 200)
    assert _logged_client(node, ignored.headers["x-request-id"]) == "127.0.0.6"
    assert _logged_client(node, believed.headers["x-request-id"]) == SPOOFED


def test_an_upload_past_the_nodes_limit_is_refused_at_the_door_in_the_services_envelope(
    node: Server, proxy: str
) -> None:
    too_large = bytes(25 * 1024 * 1024 + 128 * 1024)  # past 25 MiB and its multipart margin
    with _client(proxy, "127.0.0.7") as client:
        refused = client.post(
            "/api/v1/speech-to-text",
            headers=_auth(node),
            files={"file": ("long.wav", too_large, "audio/wav")},
        )
        # Past the nodes' 25 MiB, a transcription job's upload is still taken.
        job = client.post(
            "/api/v1/transcription-jobs",
            headers=_auth(node),
            files={"file": ("long.wav", too_large, "audio/wav")},
        )
    assert refused.status_code == 413
    error = refused.json()["error"]
    assert error["code"] == "PAYLOAD_TOO_LARGE"
    assert error["message"] == "The request body exceeds the 25 MiB limit."
    assert error["request_id"] == refused.headers["x-request-id"]
    # The node answers that one itself: zeros are no audio it can read.
    assert job.status_code == 415, job.text
    assert job.json()["error"]["request_id"].startswith("req_")


def test_websockets_upgrade_through_it_both_ways(node: Server, proxy: str) -> None:
    ws_root = proxy.replace("http://", "ws://")
    # Text streamed in: speech comes back as it is made.
    spoken = bytearray()
    url = f"{ws_root}/api/v1/text-to-speech/{JOE}/stream-input?output_format=pcm_24000"
    with connect(url, additional_headers=_auth(node), open_timeout=60) as ws:
        for text in (" ", SAID, ""):
            ws.send(json.dumps({"text": text}))
        while True:
            reply = json.loads(ws.recv(timeout=120))
            if reply.get("audio"):
                spoken += base64.b64decode(reply["audio"])
            if reply.get("isFinal"):
                break
    assert len(spoken) > 24_000  # more than half a second at 24 kHz
    # Live transcription of that speech, a turn committed by hand.
    session = {
        "type": "transcription",
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": "whisper-1", "language": "en"},
                "turn_detection": None,
            }
        },
    }
    url = f"{ws_root}/v1/realtime?intent=transcription"
    with connect(url, additional_headers=_auth(node), open_timeout=60) as ws:
        ws.send(json.dumps({"type": "session.update", "session": session}))
        piece = 24_000 * 2 // 25  # 40 ms
        for start in range(0, len(spoken), piece):
            audio = base64.b64encode(spoken[start : start + piece]).decode()
            ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        while True:
            event = json.loads(ws.recv(timeout=120))
            assert event["type"] != "error", event
            if event["type"] == "conversation.item.input_audio_transcription.completed":
                break
    assert word_errors(SAID, event["transcript"])[0] <= 1
