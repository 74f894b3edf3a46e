"""SIGTERM drains: the node stops taking connections, answers what is in flight, ends open
WebSocket sessions billed for what they received, flushes the request log and exits 0."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

from tests.helpers import speech_clips as clips
from tests.helpers.servers import running_server
from voice_service.audio.encode import MP3, encode

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


def test_sigterm_with_a_live_session_open_ends_it_billed_and_exits_0(tmp_path: Path) -> None:
    seconds = 2.5  # of 24 kHz PCM: billed as 3 units
    audio = bytes(round(seconds * 24_000) * 2)
    with running_server(tmp_path, drain_timeout_seconds="30") as server:
        url = server.base_url.removesuffix("/api/v1").replace("http://", "ws://")
        headers = {"Authorization": f"Bearer {server.api_key}"}

        async def session() -> tuple[str, list[str], int | None]:
            seen: list[str] = []

            async def until(kind: str) -> None:
                while (event := json.loads(await ws.recv()))["type"] != kind:
                    seen.append(event["type"])
                seen.append(kind)

            async with websockets.connect(
                f"{url}/v1/realtime?intent=transcription", additional_headers=headers
            ) as ws:
                assert ws.response is not None
                request_id = ws.response.headers["x-request-id"]
                await until("session.created")
                manual: dict[str, Any] = {"turn_detection": None}
                update = {"type": "transcription", "audio": {"input": manual}}
                await ws.send(json.dumps({"type": "session.update", "session": update}))
                await until("session.updated")
                for start in range(0, len(audio), 9_600):  # 200 ms pieces
                    piece = base64.b64encode(audio[start : start + 9_600]).decode()
                    await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": piece}))
                await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
                await until("input_audio_buffer.committed")  # every piece was received
                server.process.send_signal(signal.SIGTERM)
                with contextlib.suppress(websockets.ConnectionClosed):
                    async with asyncio.timeout(60):
                        while True:  # what the session still says, until the node closes it
                            seen.append(json.loads(await ws.recv())["type"])
            return request_id, seen, ws.close_code

        request_id, seen, close_code = asyncio.run(session())
        assert server.process.wait(timeout=60) == 0
    assert "input_audio_buffer.committed" in seen
    assert close_code == 1012  # "service restart": the client reconnects, to another node
    logged, billed = logged_and_billed(server.database, request_id)
    assert logged == [101]
    assert billed == [("realtime", 3)]
