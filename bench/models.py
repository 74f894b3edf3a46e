"""Issue 53's figures for models an operator chooses, in one run: the time from `voice-service
models pull` (from a loopback Hub serving the packaged Whisper base, bench.hub) to the first
transcription on the pulled model; that first request, which loads it, and the first after
an idle unload, each against a warm request on the same model; and the node's peak RSS with
two Whisper models offered and requests alternating between them, with a memory budget that
holds both beside one that holds one. The two models are the pulled base and the same files
offered as a model the operator converted (`custom`): the same size, so the budget's effect
is what differs. Not part of `python -m bench`:

    python -m bench.models [--repeats N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.hub import BASE, answer, models, running_hub
from bench.procs import Server, machine, memory_kib, start_service
from bench.speech_set import real_clips
from voice_service.audio.encode import wav_of
from voice_service.engines.whisper import prepare_base_model

# Each model's files are 148 MB: this budget holds one of them, the default holds both.
ONE_MODEL_MB = 200
BOTH_MODELS_MB = 4096
IDLE_SECONDS = 2


@contextmanager
def node(
    work: Path, name: str, pulled: Path, memory_mb: int
) -> Iterator[tuple[Server, dict[str, str]]]:
    """A node on a copy of `pulled` offering custom (the default) and base."""
    data_dir = work / name
    shutil.copytree(pulled, data_dir)
    settings = {
        "VOICE_SERVICE_WHISPER_MODELS": "custom,base",
        "VOICE_SERVICE_WHISPER_MODEL_DIR": str(data_dir / "converted"),
        "VOICE_SERVICE_MODEL_MEMORY_MB": str(memory_mb),
        "VOICE_SERVICE_MODEL_IDLE_SECONDS": str(IDLE_SECONDS),
    }
    server, first = start_service(data_dir, settings=settings)
    try:
        yield server, {"Authorization": f"Bearer {first['api_key']}"}
    finally:
        server.stop()


def transcribed(server: Server, headers: dict[str, str], audio: bytes, model: str) -> float:
    """Seconds one /speech-to-text on `model` took."""
    started = time.perf_counter()
    answered = httpx.post(
        f"{server.root}/api/v1/speech-to-text",
        headers=headers,
        files={"file": ("person.wav", audio, "audio/wav")},
        data={"model_id": model, "language": "en"},
        timeout=300,
    )
    answered.raise_for_status()
    return time.perf_counter() - started


def loaded(server: Server, headers: dict[str, str]) -> set[str]:
    listed = httpx.get(f"{server.root}/api/v1/models", headers=headers, timeout=30).json()
    return {model["model_id"] for model in listed["models"] if model["loaded"]}


def run(repeats: int) -> dict[str, Any]:
    clip = real_clips()[0]
    audio = wav_of(clip.audio, 16_000)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        base_files = prepare_base_model(work / "packaged")
        pulled = work / "pulled"
        served = {(BASE.repo, BASE.revision, f.name): base_files / f.name for f in BASE.files}
        with running_hub(served) as hub:
            started = time.perf_counter()
            answer(models(pulled, hub, "pull", "base", "--json"))
            pull_s = time.perf_counter() - started
        shutil.copytree(base_files, pulled / "converted")

        started = time.perf_counter()
        with node(work, "roomy", pulled, BOTH_MODELS_MB) as (server, headers):
            ready_s = time.perf_counter() - started
            first_s = transcribed(server, headers, audio, "base")
            warm = [transcribed(server, headers, audio, "base") for _ in range(repeats)]
            after_idle = []
            for _ in range(repeats):
                while "base" in loaded(server, headers):
                    time.sleep(0.2)
                after_idle.append(transcribed(server, headers, audio, "base"))
            for _ in range(repeats):
                for model in ("custom", "base"):
                    transcribed(server, headers, audio, model)
            roomy_kib = memory_kib(server.pid)["VmHWM"]
        with node(work, "tight", pulled, ONE_MODEL_MB) as (server, headers):
            for _ in range(repeats):
                for model in ("base", "custom"):
                    transcribed(server, headers, audio, model)
            tight_kib = memory_kib(server.pid)["VmHWM"]
    warm_s = statistics.median(warm)
    return {
        "machine": machine(),
        "repeats": repeats,
        "model_bytes": BASE.size,
        "pull_seconds": round(pull_s, 2),
        "node_ready_seconds": round(ready_s, 2),
        "first_request_seconds": round(first_s, 2),
        "warm_request_seconds": round(warm_s, 2),
        "pull_to_first_use_seconds": round(pull_s + ready_s + first_s, 2),
        "first_request_over_warm": round(first_s / warm_s, 2),
        "after_idle_unload_seconds": round(statistics.median(after_idle), 2),
        "after_idle_unload_over_warm": round(statistics.median(after_idle) / warm_s, 2),
        "peak_rss_mib_budget_of_two": round(roomy_kib / 1024),
        "peak_rss_mib_budget_of_one": round(tight_kib / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/results/models.json"))
    args = parser.parse_args()
    figures = run(args.repeats)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
