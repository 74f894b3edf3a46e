"""Jobs' pieces run below everything else: while four jobs transcribe, a live session's turn
never waits for an inference slot, by the pool's own count of the steps that waited."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import httpx
import numpy as np
import pytest
import websockets
from bench.recordings import read_recording
from bench.wer import words

from tests.helpers.app import make_settings
from tests.helpers.jobs import conversation, wav_bytes
from tests.helpers.live import serving
from voice_service.audio.encode import FORMATS, OutputFormat, encode
from voice_service.engines.protocols import Pcm
from voice_service.inference.engines import Engines
from voice_service.settings import Settings
from voice_service.web.context import AppContext

pytestmark = pytest.mark.anyio

JOBS = 4
TURN = "librivox/sense_and_sensibility_01_austen_64kb-0880.wav"  # 3.0 s
TURN_TEXT = "he was not an ill disposed young man"
PIECE_SECONDS = 0.04


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(tmp_path: Path, own_database: str) -> Settings:
    return make_settings(tmp_path, own_database, pool_size=2, job_workers=JOBS)


async def test_a_live_turn_never_waits_while_four_jobs_run(
    settings: Settings, engines: Engines
) -> None:
    with serving(settings, engines) as live:
        tenant = await live.tenants.create(rate_limit=100_000)
        context: AppContext = live.app.state.context
        async with httpx.AsyncClient(base_url=f"{live.root}/api/v1", timeout=120) as client:
            ids = []
            for _ in range(JOBS):
                submitted = await client.post(
                    "/transcription-jobs",
                    headers=tenant.headers,
                    files={"file": ("m.wav", wav_bytes(conversation(rounds=2)), "audio/wav")},
                    data={"language": "en"},
                )
                assert submitted.status_code == 202, submitted.text
                ids.append(submitted.json()["id"])

            async def statuses() -> list[str]:
                jobs = [
                    (await client.get(f"/transcription-jobs/{i}", headers=tenant.headers)).json()
                    for i in ids
                ]
                return [job["status"] for job in jobs]

            async with asyncio.timeout(120):
                while await statuses() != ["processing"] * JOBS:  # noqa: ASYNC110 (polled over HTTP)
                    await asyncio.sleep(0.5)
            before = context.pool.waited_steps()

            url = live.root.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
            audio = np.concatenate([read_recording(TURN), np.zeros(24_000, np.float32)])
            pcm = encode(
                [Pcm(np.round(audio * 32767).astype(np.int16), 16_000)], FORMATS[OutputFormat.PCM]
            )
            async with websockets.connect(url, additional_headers=tenant.headers) as ws:
                step = round(48_000 * PIECE_SECONDS)
                for start in range(0, len(pcm), step):
                    chunk = base64.b64encode(pcm[start : start + step]).decode()
                    await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
                    await asyncio.sleep(PIECE_SECONDS)
                async with asyncio.timeout(180):
                    while True:
                        event = json.loads(await ws.recv())
                        if event["type"] == "conversation.item.input_audio_transcription.completed":
                            break
            after = context.pool.waited_steps()
            assert "processing" in await statuses()  # the jobs ran all along

    assert words(event["transcript"]) == words(TURN_TEXT)
    # Jobs' pieces queued for the pool the whole time; not one live step waited.
    assert after["batch"] > before["batch"]
    assert after["live"] == before["live"] == 0
