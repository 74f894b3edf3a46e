"""Figure 17's peer for transcription: wyoming-faster-whisper, Home Assistant's Whisper
server, on the same Whisper base directory as ours, with the same beam (5), offline."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from bench import wyoming_client
from bench.procs import PYTHON, START_TIMEOUT_S, Server, free_port
from voice_service.engines.whisper import BEAM_SIZE


def start(model: Path, work: Path) -> Server:
    """`python -m wyoming_faster_whisper` on `model` (a CTranslate2 Whisper directory), on a
    free port; ready once it answers `describe`."""
    port = free_port()
    log = (work / "wyoming-faster-whisper.log").open("wb")
    command = [
        PYTHON, "-m", "wyoming_faster_whisper",
        "--uri", f"tcp://127.0.0.1:{port}",
        "--model", str(model),
        "--stt-library", "faster-whisper",
        "--data-dir", str(work / "wyoming-whisper-data"),
        "--beam-size", str(BEAM_SIZE),
        "--local-files-only",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    server = Server(process, f"tcp://127.0.0.1:{port}", [log])
    try:
        _wait_ready(server, port)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: Server, port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    silence = bytes(2 * 16_000)
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"wyoming-faster-whisper exited with {server.process.returncode}")
        try:
            asyncio.run(wyoming_client.transcribe(port, silence, 16_000, "en"))
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
