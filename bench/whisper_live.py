"""Figure 16's peer: WhisperLive (`whisper-live` on PyPI, Collabora's live-transcription
server on faster-whisper), on the same Whisper base directory as ours, offline.

Its declared dependencies pull CUDA, OpenVINO and PyAudio, so it is installed apart, into
the run's work dir with `--no-deps`, and run by this Python, which has what its
faster-whisper backend imports (faster-whisper, torch on the CPU, websockets, fastapi). Its
voice activity detector wants Silero v5 from GitHub; it is given the Silero VAD that
faster-whisper ships (v6, the same inputs and outputs) in the cache it looks in.

A session is driven by its own client protocol (`bench.live_conversation`): the options as
JSON, then 16 kHz float32 audio; WhisperLive sends its segments again as they grow, and marks
one `completed` once it is final.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from importlib.resources import files
from pathlib import Path
from typing import Any

import websockets

from bench.procs import PYTHON, Server, free_port, start_peer

VERSION = "0.10.0"
_SERVE = """
import sys
from whisper_live.server import TranscriptionServer
TranscriptionServer().run(
    "127.0.0.1", int(sys.argv[1]), backend="faster_whisper",
    faster_whisper_custom_model_path=sys.argv[2], single_model=True,
)
"""


def start(model: Path, work: Path) -> Server:
    """WhisperLive on `model`, installed into `work` (its package from PyPI)."""
    target, home = work / "whisper-live", work / "whisper-live-home"
    subprocess.run(
        [PYTHON, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         f"whisper-live=={VERSION}"],
        check=True,
        timeout=300,
    )  # fmt: skip
    cache = home / ".cache" / "whisper-live"
    cache.mkdir(parents=True)
    shutil.copy(
        Path(str(files("faster_whisper") / "assets" / "silero_vad_v6.onnx")),
        cache / "silero_vad.onnx",
    )
    port = free_port()
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(target)}
    url = f"ws://127.0.0.1:{port}"
    command = [PYTHON, "-c", _SERVE, str(port), str(model)]
    return start_peer("whisper-live", command, url, work, lambda: asyncio.run(_ready(url)), env)


async def _ready(url: str) -> None:
    async with websockets.connect(url) as ws:
        await ws.send(json.dumps(options()))
        json.loads(await ws.recv())


def options() -> dict[str, Any]:
    """A session's opening message: English, Whisper's own model (the server's, given at
    start), its voice activity detection on."""
    return {
        "uid": str(uuid.uuid4()),
        "language": "en",
        "task": "transcribe",
        "model": "base",
        "use_vad": True,
    }
