"""SIGTERM drains: the node stops taking connections, answers what is in flight, ends open
WebSocket sessions billed for what they received, flushes the request log and exits 0."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import websockets
from bench.wer import word_errors
from websockets.asyncio.client import ClientConnection

from tests.helpers import speech_clips as clips
from tests.helpers.servers import running_server
from tests.helpers.voices import JOE
from voice_service.audio.encode import FORMATS, MP3, OutputFormat, encode
from voice_service.engines.protocols import Pcm

TEXT = " ".join(clips.ENGLISH_TEXTS) * 3  # about a minute of speech: seconds to transcribe


def uploads_in_progress(data_dir: Path) -> list[Path]:
    """The server's own evidence of a transcription under way: its upload, on disk from
    the moment the body is parsed until the transcript is made."""
    return list((data_dir / "run").glob("*/uploads/upload-*"))


def logged_and_billed(database: Path, request_id: str) -> tuple[list[int], list[tuple[str, int]]]:
    """The statuses the request log holds for `request_id`, and its usage rows."""
    with sqlite3.connect(database) as db:
        logged = db.execute("SELECT status FROM request_log WHERE request_id = ?", (request_id,))
        statuses = [status for (status,) in logged.fetchall()]
        billed = db.execute(
            "SELECT endpoint, units FROM usage_records WHERE request_id = ?", (request_id,)
        )
        return statuses, [(endpoint, units) for endpoint, units in billed.fetchall()]


def test_sigterm_during_a_transcription_lets_it_finish_then_exits_0(tmp_path: Path) -> None:
    audio = encode([clips.english_speech(TEXT)], MP3)
    with running_server(tmp_path, drain_timeout_seconds="120") as server:
        answers: list[httpx.Response] = []

        def transcribe() -> None:
            answers.append(
                httpx.post(
                    f"{server.base_url}/speech-to-text",
                    headers={"Authorization": f"Bearer {server.api_key}"},
                    files={"file": ("talk.mp3", audio)},
                    data={"language": "en"},
                    timeout=300,
                )
            )

        caller = threading.Thread(target=transcribe)
        caller.start()
        deadline = time.monotonic() + 120
        while not uploads_in_progress(server.data_dir):
            assert time.monotonic() < deadline and caller.is_alive(), "no upload seen"
            time.sleep(0.01)
        server.process.send_signal(signal.SIGTERM)
        caller.join(300)
        assert server.process.wait(timeout=120) == 0
    (answer,) = answers
    assert answer.status_code == 200
    assert "quick brown fox" in answer.json()["text"].lower()
    logged, billed = logged_and_billed(server.database, answer.headers["x-request-id"])
    assert logged == [200]
    assert len(billed) == 1 and billed[0][0] == "speech-to-text" and billed[0][1] > 30
    assert not uploads_in_progress(server.data_dir)


def pcm_24k(pcm: Pcm) -> bytes:
    return encode([pcm], FORMATS[OutputFormat.PCM])


async def events_until(ws: ClientConnection, kind: str, seen: list[dict[str, Any]]) -> None:
    while (event := json.loads(await ws.recv()))["type"] != kind:
        seen.append(event)
    seen.append(event)


async def append_all(ws: ClientConnection, audio: bytes, seen: list[dict[str, Any]]) -> None:
    """`audio` in 200 ms pieces, then an event the session refuses: its `error` answer
    proves every piece before it was taken (events are handled in order)."""
    for start in range(0, len(audio), 9_600):
        piece = base64.b64encode(audio[start : start + 9_600]).decode()
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": piece}))
    await ws.send(json.dumps({"type": "no.such.event"}))
    await events_until(ws, "error", seen)


async def rest_until_closed(ws: ClientConnection, seen: list[Any]) -> int | None:
    """What the session still says until the node closes it; the close code."""
    with contextlib.suppress(websockets.ConnectionClosed):
        async with asyncio.timeout(60):
            while True:
                seen.append(json.loads(await ws.recv()))
    return ws.close_code


def transcripts(seen: list[dict[str, Any]]) -> list[str]:
    completed = "conversation.item.input_audio_transcription.completed"
    return [event["transcript"] for event in seen if event["type"] == completed]


def test_sigterm_transcribes_a_committed_turn_then_closes_the_session_billed(
    tmp_path: Path,
) -> None:
    audio = pcm_24k(clips.english_speech())  # about 4 s: billed as whole seconds
    with running_server(tmp_path, drain_timeout_seconds="30") as server:
        url = server.base_url.removesuffix("/api/v1").replace("http://", "ws://")
        headers = {"Authorization": f"Bearer {server.api_key}"}

        async def session() -> tuple[str, list[dict[str, Any]], int | None]:
            seen: list[dict[str, Any]] = []
            async with websockets.connect(
                f"{url}/v1/realtime?intent=transcription", additional_headers=headers
            ) as ws:
                assert ws.response is not None
                request_id = ws.response.headers["x-request-id"]
                await events_until(ws, "session.created", seen)
                manual: dict[str, Any] = {"turn_detection": None}
                update = {"type": "transcription", "audio": {"input": manual}}
                await ws.send(json.dumps({"type": "session.update", "session": update}))
                await events_until(ws, "session.updated", seen)
                await append_all(ws, audio, seen)
                await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
                await events_until(ws, "input_audio_buffer.committed", seen)
                # Transcribing the turn takes about a second; uvicorn alone closed the
                # session within 0.1 s of the signal, the turn untranscribed.
                server.process.send_signal(signal.SIGTERM)
                close_code = await rest_until_closed(ws, seen)
            return request_id, seen, close_code

        request_id, seen, close_code = asyncio.run(session())
        assert server.process.wait(timeout=60) == 0
    (transcript,) = transcripts(seen)
    assert word_errors(clips.ENGLISH_TEXT, transcript)[0] <= 2, transcript
    assert close_code == 1012  # "service restart": the client reconnects, to another node
    logged, billed = logged_and_billed(server.database, request_id)
    assert logged == [101]
    assert billed == [("realtime", math.ceil(len(audio) / 48_000))]


def test_sigterm_finishes_a_turn_being_spoken_and_text_being_streamed_in(
    tmp_path: Path,
) -> None:
    speech = pcm_24k(clips.english_speech())  # no silence after it: the turn stays open
    text = ["Thanks for calling, ", "how can I help you with your order today"]
    with running_server(tmp_path, drain_timeout_seconds="30") as server:
        root = server.base_url.removesuffix("/api/v1").replace("http://", "ws://")
        headers = {"Authorization": f"Bearer {server.api_key}"}

        async def live(ws: ClientConnection, seen: list[dict[str, Any]]) -> None:
            await events_until(ws, "session.created", seen)
            await append_all(ws, speech, seen)
            assert "input_audio_buffer.speech_started" in [event["type"] for event in seen]
            assert "input_audio_buffer.committed" not in [event["type"] for event in seen]

        async def speaking(ws: ClientConnection, seen: list[dict[str, Any]]) -> None:
            await ws.send(json.dumps({"text": " "}))
            for piece in text:
                await ws.send(json.dumps({"text": piece, "try_trigger_generation": True}))
            # The first clause's audio: the text before it was taken. The rest is no
            # clause yet; the client has not ended its text.
            while not (message := json.loads(await ws.recv())).get("audio"):
                pass
            seen.append(message)

        async def sessions() -> tuple[list[Any], list[Any], list[int | None]]:
            said: list[dict[str, Any]] = []
            spoken: list[dict[str, Any]] = []
            async with (
                websockets.connect(
                    f"{root}/v1/realtime?intent=transcription", additional_headers=headers
                ) as heard,
                websockets.connect(
                    f"{root}/api/v1/text-to-speech/{JOE}/stream-input", additional_headers=headers
                ) as spoke,
            ):
                await asyncio.gather(live(heard, said), speaking(spoke, spoken))
                server.process.send_signal(signal.SIGTERM)
                codes = await asyncio.gather(
                    rest_until_closed(heard, said), rest_until_closed(spoke, spoken)
                )
            return said, spoken, codes

        said, spoken, codes = asyncio.run(sessions())
        assert server.process.wait(timeout=60) == 0
    assert codes == [1012, 1012]
    (transcript,) = transcripts(said)  # the open turn, committed as it stood
    assert word_errors(clips.ENGLISH_TEXT, transcript)[0] <= 2, transcript
    characters = "".join(
        "".join(message["alignment"]["chars"]) for message in spoken if message.get("alignment")
    )
    assert characters.strip() == "".join(text).strip()  # the unfinished clause was spoken too
    assert spoken[-1] == {"audio": None, "isFinal": True}
