"""Figure 17's peer for transcription: wyoming-faster-whisper, Home Assistant's Whisper
server, on the same Whisper base directory as ours, with the same beam (5), offline."""

from __future__ import annotations

from pathlib import Path

from bench import wyoming_client
from bench.procs import PYTHON, Server
from voice_service.engines.whisper import BEAM_SIZE


def start(model: Path, work: Path) -> Server:
    """`python -m wyoming_faster_whisper` on `model` (a CTranslate2 Whisper directory)."""
    command = [
        PYTHON, "-m", "wyoming_faster_whisper",
        "--model", str(model),
        "--stt-library", "faster-whisper",
        "--data-dir", str(work / "wyoming-whisper-data"),
        "--beam-size", str(BEAM_SIZE),
        "--local-files-only",
    ]  # fmt: skip
    silence = bytes(2 * 16_000)
    return wyoming_client.start_peer(
        "wyoming-faster-whisper",
        command,
        work,
        lambda port: wyoming_client.transcribe(port, silence, 16_000, "en"),
    )
