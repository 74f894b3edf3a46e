"""Live transcription on a light node with no Whisper of its own: each turn (and each
partial) goes to the provider the providers file names, a real faster-whisper-server."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import websockets
from bench.recordings import read_recording
from bench.wer import word_errors

from tests.helpers.servers import Server, running_server
from tests.helpers.upstreams import FasterWhisperServer, faster_whisper_server, providers_file
from tests.helpers.waiting import eventually
from voice_service.audio.encode import FORMATS, OutputFormat, encode
from voice_service.engines.protocols import Pcm

pytestmark = pytest.mark.anyio

RECORDING = "librivox/sense_and_sensibility_01_austen_64kb-0880.wav"  # 3.0 s
SAID = "he was not an ill disposed young man"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FasterWhisperServer]:
    with faster_whisper_server(tmp_path_factory.mktemp("fws")) as server:
        yield server


@pytest.fixture(scope="module")
def light_node(
    tmp_path_factory: pytest.TempPathFactory, upstream: FasterWhisperServer
) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("light")
    toml = f"""
[[provider]]
name = "gpu-whisper"
kind = "openai"
base_urls = ["{upstream.v1}"]
timeout_seconds = 120

[provider.transcription]
model = "Systran/faster-whisper-base"
languages = ["*"]
"""
    path = providers_file(Path(directory) / "providers.toml", toml)
    with running_server(
        directory, stt_engines="", tts_engines="", providers_file=str(path)
    ) as server:
        yield server


async def test_turns_are_transcribed_by_the_provider(
    light_node: Server, upstream: FasterWhisperServer
) -> None:
    clip = np.concatenate([read_recording(RECORDING), np.zeros(16_000, dtype=np.float32)])
    pcm = encode([Pcm(np.round(clip * 32767).astype(np.int16), 16_000)], FORMATS[OutputFormat.PCM])
    before = upstream.transcriptions_answered()
    url = light_node.root.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
    headers = {"Authorization": f"Bearer {light_node.api_key}"}
    async with websockets.connect(url, additional_headers=headers) as ws:
        session = {
            "type": "transcription",
            "audio": {"input": {"transcription": {"language": "en"}}},
        }
        await ws.send(json.dumps({"type": "session.update", "session": session}))
        step = 48_000 * 40 // 1000  # 40 ms of 24 kHz 16-bit audio
        for start in range(0, len(pcm), step):
            audio = base64.b64encode(pcm[start : start + step]).decode()
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
            await asyncio.sleep(0.04)
        async with asyncio.timeout(120):
            while True:
                event = json.loads(await ws.recv())
                if event["type"] == "conversation.item.input_audio_transcription.completed":
                    break
                assert event["type"] != "error", event
    assert word_errors(SAID, event["transcript"])[0] <= 1, event["transcript"]
    # The upstream's own log: it answered the turn (and any partials).
    assert eventually(lambda: upstream.transcriptions_answered() > before)
