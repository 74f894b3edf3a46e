"""SIGTERM drains: the node stops taking connections, answers what is in flight, flushes the
request log and exits 0."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx

from tests.helpers import speech_clips as clips
from tests.helpers.servers import running_server
from voice_service.audio.encode import MP3, encode

TEXT = " ".join(clips.ENGLISH_TEXTS) * 3  # about a minute of speech: seconds to transcribe


def uploads_in_progress(data_dir: Path) -> list[Path]:
    """The server's own evidence of a transcription under way: its upload, on disk from
    the moment the body is parsed until the transcript is made."""
    return list((data_dir / "run").glob("*/uploads/upload-*"))


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
    request_id = answer.headers["x-request-id"]
    with sqlite3.connect(server.database) as db:
        logged = db.execute(
            "SELECT status FROM request_log WHERE request_id = ?", (request_id,)
        ).fetchall()
        billed = db.execute(
            "SELECT units FROM usage_records WHERE request_id = ?", (request_id,)
        ).fetchall()
    assert logged == [(200,)]
    assert len(billed) == 1 and billed[0][0] > 30
    assert not uploads_in_progress(server.data_dir)
