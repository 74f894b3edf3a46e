"""Live transcription over OpenAI's Realtime protocol, on a real node: the official `openai`
SDK and a plain `websockets` client, real recordings streamed at real-time pace.

Ordering is proven from the server's own events, never from wall-clock thresholds: a delta
before `speech_stopped` can only be partial text, because the client sends the silence that
ends the turn only after it has seen the delta.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest
import websockets
from bench.recordings import read_recording
from bench.wer import word_errors
from openai import AsyncOpenAI
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import InvalidStatus

from tests.helpers.servers import Server, running_server
from tests.helpers.waiting import eventually
from voice_service.audio.encode import FORMATS, AudioFormat, OutputFormat, encode
from voice_service.audio.output_formats import NAMED_FORMATS
from voice_service.engines.protocols import Pcm

pytestmark = pytest.mark.anyio

CLIP = "librivox/sense_and_sensibility_01_austen_64kb-0870.wav"  # 7.1 s, one sentence
SHORT = "librivox/sense_and_sensibility_01_austen_64kb-0880.wav"  # 3.0 s
SHORT_TEXT = "he was not an ill disposed young man"
OTHER = "librivox/sense_and_sensibility_01_austen_64kb-0930.wav"  # 3.3 s
OTHER_TEXT = "he might even have been made amiable himself"
PCM = FORMATS[OutputFormat.PCM]  # OpenAI's audio/pcm: 16-bit, 24 kHz
ULAW = NAMED_FORMATS["ulaw_8000"]  # audio/pcmu
PIECE_SECONDS = 0.04  # what a client sends at a time (the issue: 20 to 100 ms)
SESSION_LIMIT = 3
IDLE_SECONDS = 4
PATIENCE = 180.0  # seconds a test waits for the server's next event (a loaded CI machine)
DELTA = "conversation.item.input_audio_transcription.delta"
COMPLETED = "conversation.item.input_audio_transcription.completed"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("realtime"),
        max_realtime_sessions_per_key=str(SESSION_LIMIT),
        realtime_idle_seconds=str(IDLE_SECONDS),
    ) as server:
        yield server


def as_sent(audio: npt.NDArray[np.float32], fmt: AudioFormat) -> bytes:
    """16 kHz float audio as a client sends it: 24 kHz PCM, or 8 kHz G.711."""
    return encode([Pcm(np.round(audio * 32767).astype(np.int16), 16_000)], fmt)


def silence(seconds: float) -> npt.NDArray[np.float32]:
    return np.zeros(round(seconds * 16_000), dtype=np.float32)


def bytes_per_second(fmt: AudioFormat) -> int:
    return 48_000 if fmt is PCM else 8_000


def pieces(data: bytes, fmt: AudioFormat) -> Iterator[bytes]:
    step = round(bytes_per_second(fmt) * PIECE_SECONDS)
    for start in range(0, len(data), step):
        yield data[start : start + step]


def append(data: bytes) -> str:
    audio = base64.b64encode(data).decode()
    return json.dumps({"type": "input_audio_buffer.append", "audio": audio})


def session_update(**audio_input: Any) -> str:
    session = {"type": "transcription", "audio": {"input": audio_input}}
    return json.dumps({"type": "session.update", "session": session})


class Events:
    """A session's server events, in order, as they arrive."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.seen: list[dict[str, Any]] = []

    async def until(self, kind: str) -> dict[str, Any]:
        async with asyncio.timeout(PATIENCE):
            while True:
                event = json.loads(await self.ws.recv())
                self.seen.append(event)
                if event["type"] == kind:
                    return event

    def kinds(self) -> list[str]:
        return [event["type"] for event in self.seen]


@asynccontextmanager
async def session(
    node: Server, path: str = "/v1/realtime?intent=transcription", key: str | None = None
) -> AsyncIterator[Events]:
    url = node.root.replace("http://", "ws://") + path
    headers = {"Authorization": f"Bearer {key or node.api_key}"}
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        events = Events(ws)
        await events.until("session.created")
        yield events


async def stream(events: Events, data: bytes, fmt: AudioFormat = PCM) -> None:
    """`data` at real-time pace, a piece at a time."""
    for piece in pieces(data, fmt):
        await events.ws.send(append(piece))
        await asyncio.sleep(PIECE_SECONDS)


def batch_transcript(node: Server, audio: npt.NDArray[np.float32]) -> str:
    wav = encode([Pcm(np.round(audio * 32767).astype(np.int16), 16_000)], FORMATS[OutputFormat.WAV])
    response = httpx.post(
        f"{node.root}/v1/audio/transcriptions",
        headers={"Authorization": f"Bearer {node.api_key}"},
        files={"file": ("clip.wav", wav, "audio/wav")},
        data={"model": "whisper-1", "language": "en"},
        timeout=PATIENCE,
    )
    assert response.status_code == 200, response.text
    text: str = response.json()["text"]
    return text


def logged(node: Server, request_id: str) -> dict[str, Any] | None:
    rows = node.query("SELECT * FROM request_log WHERE request_id = ?", request_id)
    return dict(rows[0]) if rows else None


def billed(node: Server, request_id: str) -> list[tuple[str, int]]:
    rows = node.query("SELECT endpoint, units FROM usage_records WHERE request_id = ?", request_id)
    return [(row["endpoint"], row["units"]) for row in rows]


def request_id(events: Events) -> str:
    response = events.ws.response
    assert response is not None
    return response.headers["x-request-id"]


# --- live turns ------------------------------------------------------------------------------


async def test_a_recording_streamed_live_gives_deltas_then_the_batch_transcript(
    node: Server,
) -> None:
    clip = read_recording(CLIP)
    async with session(node) as events:
        await events.ws.send(session_update(transcription={"model": "whisper-1", "language": "en"}))
        await events.until("session.updated")
        await stream(events, as_sent(np.concatenate([silence(0.5), clip]), PCM))
        # The speaker has not stopped: no silence has been sent since the speech.
        first_delta = await events.until(DELTA)
        await stream(events, as_sent(silence(1.0), PCM))
        stopped = await events.until("input_audio_buffer.speech_stopped")
        completed = await events.until(COMPLETED)
        rid = request_id(events)
    kinds = events.kinds()
    assert kinds.index("input_audio_buffer.speech_started") < kinds.index(DELTA)
    assert kinds.index(DELTA) < kinds.index("input_audio_buffer.speech_stopped")
    assert kinds.index("input_audio_buffer.committed") < kinds.index(COMPLETED)
    item = first_delta["item_id"]
    assert stopped["item_id"] == completed["item_id"] == item
    assert stopped["audio_end_ms"] > 500 + 7000  # after the speech, in the session's audio
    # Decoded afresh, not on from the deltas: what a batch transcription says.
    assert completed["transcript"] == batch_transcript(node, clip)
    # The deltas said the words the transcript begins with (it may correct one).
    said = "".join(event["delta"] for event in events.seen if event["type"] == DELTA).split()
    assert said
    edits, _ = word_errors(" ".join(said), " ".join(completed["transcript"].split()[: len(said)]))
    assert edits <= 1, (said, completed["transcript"])
    # One session, one log row (101) once it closed, billed by the seconds it sent.
    row = eventually(lambda: logged(node, rid))
    assert row is not None and (row["status"], row["method"]) == (101, "GET")
    assert billed(node, rid) == [("realtime", math.ceil(0.5 + clip.size / 16_000 + 1.0))]


async def test_the_openai_sdk_commits_turns_by_hand(node: Server) -> None:
    client = AsyncOpenAI(base_url=f"{node.root}/v1", api_key=node.api_key)
    short, other = read_recording(SHORT), read_recording(OTHER)
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as connection:
        created = await connection.recv()
        assert created.type == "session.created"
        await connection.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "transcription": {"model": "whisper-1", "language": "en"},
                        "turn_detection": None,
                    }
                },
            }
        )
        transcripts: dict[str, str] = {}
        committed: list[Any] = []
        for clip in (short, other):
            for piece in pieces(as_sent(clip, PCM), PCM):
                await connection.input_audio_buffer.append(audio=base64.b64encode(piece).decode())
            await connection.input_audio_buffer.commit()
        async with asyncio.timeout(PATIENCE):
            async for event in connection:
                if event.type == "input_audio_buffer.committed":
                    committed.append(event)
                elif event.type == COMPLETED:
                    transcripts[event.item_id] = event.transcript
                    if len(transcripts) == 2:
                        break
                elif event.type == "error":
                    pytest.fail(event.error.message)
    first, second = committed
    assert (first.previous_item_id, second.previous_item_id) == (None, first.item_id)
    for item, reference in ((first.item_id, SHORT_TEXT), (second.item_id, OTHER_TEXT)):
        edits, _ = word_errors(reference, transcripts[item])
        assert edits <= 1, transcripts[item]


async def test_phone_audio_in_mu_law(node: Server) -> None:
    clip = read_recording(SHORT)
    async with session(node) as events:
        await events.ws.send(
            session_update(
                format={"type": "audio/pcmu"},
                transcription={"language": "en"},
                turn_detection=None,
            )
        )
        updated = await events.until("session.updated")
        assert updated["session"]["audio"]["input"]["format"] == {"type": "audio/pcmu"}
        sent = as_sent(clip, ULAW)
        for piece in pieces(sent, ULAW):
            await events.ws.send(append(piece))
        await events.ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        completed = await events.until(COMPLETED)
        rid = request_id(events)
    edits, _ = word_errors(SHORT_TEXT, completed["transcript"])
    assert edits <= 1, completed["transcript"]
    eventually(lambda: logged(node, rid))
    assert billed(node, rid) == [("realtime", math.ceil(len(sent) / 8_000))]


async def test_two_sessions_at_once_each_get_their_own_turns(node: Server) -> None:
    async def one(path: str, recording: str) -> str:
        async with session(node, path) as events:
            await events.ws.send(session_update(transcription={"language": "en"}))
            await stream(
                events, as_sent(np.concatenate([read_recording(recording), silence(1.0)]), PCM)
            )
            completed = await events.until(COMPLETED)
            transcript: str = completed["transcript"]
            return transcript

    # The native path speaks the same protocol.
    short, other = await asyncio.gather(
        one("/v1/realtime?intent=transcription", SHORT),
        one("/api/v1/speech-to-text/realtime", OTHER),
    )
    assert word_errors(SHORT_TEXT, short)[0] <= 1, short
    assert word_errors(OTHER_TEXT, other)[0] <= 1, other


# --- limits and ends ---------------------------------------------------------------------------


async def test_a_key_has_at_most_its_limit_of_sessions(node: Server) -> None:
    # A key of its own: the places the other tests' keys hold are theirs.
    key = node.cli("keys", "create", node.org_id)
    path, secret = "/v1/realtime?intent=transcription", key["secret"]
    open_rows = "SELECT count(*) AS n FROM realtime_sessions WHERE key_id = ?"
    async with (
        session(node, path, secret) as first,
        session(node, path, secret),
        session(node, path, secret),
    ):
        with pytest.raises(InvalidStatus) as refused:
            async with session(node, path, secret):
                pass
        response = refused.value.response
        assert response.status_code == 429
        assert response.headers["retry-after"] == "1"
        error = json.loads(response.body)["error"]
        assert error["code"] == "rate_limited"
        assert "VOICE_SERVICE_MAX_REALTIME_SESSIONS_PER_KEY" in error["message"]
        await first.ws.close()
        # The place is freed once the server has seen the close (its row is gone), and taken
        # again.
        assert eventually(lambda: node.query(open_rows, key["id"])[0]["n"] == SESSION_LIMIT - 1)
        async with session(node, path, secret):
            pass


async def test_a_client_that_vanishes_is_billed_for_what_it_sent(node: Server) -> None:
    sent = as_sent(read_recording(SHORT)[: 16_000 * 5 // 2], PCM)  # 2.5 s
    async with session(node) as events:
        await events.ws.send(session_update(turn_detection=None))
        await events.until("session.updated")
        for piece in pieces(sent, PCM):
            await events.ws.send(append(piece))
        rid = request_id(events)
        await events.ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        await events.until("input_audio_buffer.cleared")  # every piece has arrived
        events.ws.transport.abort()  # gone, without a close frame
    row = eventually(lambda: logged(node, rid))
    assert row is not None and row["status"] == 101
    assert billed(node, rid) == [("realtime", 3)]


async def test_a_monthly_cap_stops_the_audio_at_the_cap(node: Server) -> None:
    key = node.cli("keys", "create", node.org_id, "--monthly-units", "2")["secret"]
    path = "/v1/realtime?intent=transcription"
    sent = as_sent(read_recording(SHORT), PCM)  # 3 s: a second more than the cap
    async with session(node, path, key) as events:
        await events.ws.send(session_update(turn_detection=None))
        await events.until("session.updated")
        for piece in pieces(sent, PCM):
            await events.ws.send(append(piece))
        error = await events.until("error")
        assert error["error"]["code"] == "rate_limited"
        assert "monthly cap of 2 units" in error["error"]["message"]
        with pytest.raises(websockets.ConnectionClosedOK):
            await events.ws.recv()
        rid = request_id(events)
    eventually(lambda: logged(node, rid))
    assert billed(node, rid) == [("realtime", 2)]  # never past the cap
    status, body = await refusal(node, path, key)
    assert status == 429 and "monthly cap" in body["error"]["message"]


async def test_an_idle_session_is_closed_with_an_error_event(node: Server) -> None:
    async with session(node) as events:
        error = await events.until("error")
        assert error["error"]["code"] == "session_idle"
        with pytest.raises(websockets.ConnectionClosedOK):
            await events.ws.recv()
        rid = request_id(events)
    row = eventually(lambda: logged(node, rid))
    assert row is not None and row["status"] == 101
    assert billed(node, rid) == []  # no audio, nothing billed


async def test_bad_events_get_error_events_and_the_session_goes_on(node: Server) -> None:
    async with session(node) as events:
        for bad, code in [
            ("not json", "invalid_json"),
            ("[" * 100_000, "invalid_json"),  # deeper than any parser goes
            (json.dumps({"type": "response.create"}), "unknown_event"),
            (json.dumps({"type": "input_audio_buffer.append", "audio": "%%%"}), "invalid_value"),
            (session_update(format={"type": "audio/flac"}), "invalid_value"),
            (session_update(transcription={"language": "klingon"}), "invalid_value"),
            (
                session_update(turn_detection={"type": "server_vad", "threshold": 7}),
                "invalid_value",
            ),
            (json.dumps({"type": "input_audio_buffer.commit"}), "input_audio_buffer_commit_empty"),
        ]:
            await events.ws.send(bad)
            error = await events.until("error")
            assert error["error"]["code"] == code, (bad, error)
        await events.ws.send(session_update(turn_detection=None, transcription={"language": "en"}))
        await events.until("session.updated")
        await events.ws.send(append(as_sent(read_recording(SHORT), PCM)))
        await events.ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        completed = await events.until(COMPLETED)
    assert word_errors(SHORT_TEXT, completed["transcript"])[0] <= 1


# --- refused upgrades -----------------------------------------------------------------------------


async def refusal(node: Server, path: str, key: str | None) -> tuple[int, dict[str, Any]]:
    """The status and body of an upgrade refused before upgrading."""
    with pytest.raises(InvalidStatus) as refused:
        async with session(node, path, key):
            pass
    response = refused.value.response
    return response.status_code, json.loads(response.body)


@pytest.mark.parametrize(
    ("path", "key", "status", "shape"),
    [
        ("/v1/realtime?intent=transcription", "vs_nope", 401, "openai"),
        ("/api/v1/speech-to-text/realtime", "vs_nope", 401, "native"),
        ("/v1/realtime?model=gpt-realtime", None, 400, "openai"),
    ],
)
async def test_upgrades_are_refused_before_upgrading_in_the_apis_shape(
    node: Server, path: str, key: str | None, status: int, shape: str
) -> None:
    got, body = await refusal(node, path, key)
    assert got == status
    if shape == "openai":
        assert set(body["error"]) >= {"message", "type", "code"}
    else:
        assert set(body["error"]) == {"code", "message", "request_id"}


async def test_a_key_without_speech_to_text_is_refused(node: Server) -> None:
    key = node.cli("keys", "create", node.org_id, "--scopes", "text-to-speech")["secret"]
    status, body = await refusal(node, "/v1/realtime?intent=transcription", key)
    assert status == 403
    assert "speech-to-text" in body["error"]["message"]
