"""Figure 18: a long recording as a transcription job, on a running node.

The recording is real speech (pocketsphinx-testdata's readers, one after another with a
pause between, over and over) an hour long (--quick: 15 s). Measured in one run: how long
its POST takes (upload, measuring, storing), and how soon after its 202 the job's progress
first moves; its real-time factor, from the node's own `started_at` and `finished_at`,
against the sync endpoint's on the same pieces (cut as the job cuts them; a sample of them
in full runs: every `SAMPLE_EVERY`th); the node's peak RSS growth while the job runs; and a
live session's final latency while four jobs run, against the same session on the idle
node.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from bench import realtime
from bench.speech_set import real_clips
from voice_service.audio.encode import wav_of
from voice_service.audio.pieces import PieceCutter
from voice_service.audio.vad import RATE

HOUR = 3600.0
QUICK_SECONDS = 15.0
GAP_SECONDS = 0.8  # a speaker's pause between the readers' recordings
SAMPLE_EVERY = 6  # full runs send every 6th piece to the sync endpoint
BUSY_JOBS = 4
Ran = dict[str, Any]


def long_recording(seconds: float) -> npt.NDArray[np.float32]:
    """Real speech `seconds` long: the recordings in turn, a pause after each."""
    gap = np.zeros(round(GAP_SECONDS * RATE), np.float32)
    turn = np.concatenate([part for clip in real_clips() for part in (clip.audio, gap)])
    repeats = int(np.ceil(seconds * RATE / turn.size))
    return np.tile(turn, repeats)[: round(seconds * RATE)]


class Jobs:
    def __init__(self, base: str, auth: dict[str, str]) -> None:
        self.client = httpx.Client(base_url=base, headers=auth, timeout=600)

    def submit(self, audio: bytes) -> dict[str, Any]:
        answer = self.client.post(
            "/transcription-jobs",
            files={"file": ("recording.wav", audio, "audio/wav")},
            data={"language": "en"},
        )
        answer.raise_for_status()
        job: dict[str, Any] = answer.json()
        return job

    def get(self, job_id: str) -> dict[str, Any]:
        answer = self.client.get(f"/transcription-jobs/{job_id}")
        answer.raise_for_status()
        job: dict[str, Any] = answer.json()
        return job

    def cancel(self, job_id: str) -> None:
        self.client.delete(f"/transcription-jobs/{job_id}").raise_for_status()

    def sync_seconds(self, piece: bytes) -> float:
        started = time.perf_counter()
        answer = self.client.post(
            "/speech-to-text",
            files={"file": ("piece.wav", piece, "audio/wav")},
            data={"language": "en"},
        )
        answer.raise_for_status()
        return time.perf_counter() - started


def measure(
    base: str,
    auth: dict[str, str],
    key: str,
    quick: bool,
    peak_rss_growth: Callable[[Callable[[], Ran]], tuple[float, Ran, dict[str, Any]]],
) -> dict[str, Any]:
    """What figure 18 reports; `peak_rss_growth(action)` runs `action` and gives the
    node's peak RSS growth in KiB while it ran."""
    jobs = Jobs(base, auth)
    seconds = QUICK_SECONDS if quick else HOUR
    recording = long_recording(seconds)
    audio = wav_of(recording, RATE)

    def one_job() -> dict[str, Any]:
        sent = time.perf_counter()
        job = jobs.submit(audio)  # uploaded, measured, stored, queued: accepted
        accepted = time.perf_counter()
        first_progress: float | None = None
        while job["status"] in ("queued", "processing"):
            time.sleep(0.2)
            job = jobs.get(job["id"])
            if first_progress is None and job["progress_seconds"] > 0:
                first_progress = time.perf_counter() - accepted
        assert job["status"] == "completed", job
        return {"job": job, "first_progress_s": first_progress, "submit_s": accepted - sent}

    growth_kib, ran, memory = peak_rss_growth(one_job)
    job = ran["job"]
    started, finished = (datetime.fromisoformat(job[k]) for k in ("started_at", "finished_at"))
    job_s = (finished - started).total_seconds()

    pieces = _speech_pieces(recording)
    sample = pieces if quick else pieces[::SAMPLE_EVERY]
    sync_s = sum(jobs.sync_seconds(wav_of(piece, RATE)) for piece in sample)
    sampled_audio_s = sum(piece.size for piece in sample) / RATE
    speech_audio_s = sum(piece.size for piece in pieces) / RATE
    sync_rtf = sync_s * (speech_audio_s / sampled_audio_s) / seconds

    live_idle, live_busy = _live_beside_jobs(jobs, base, key, quick)
    return {
        "audio_s": seconds,
        "job_id": job["id"],
        "job_processing_s": job_s,
        "job_rtf": job_s / seconds,
        "first_progress_s": ran["first_progress_s"],
        "submit_s": ran["submit_s"],
        "pieces": len(pieces),
        "sync_pieces_sent": len(sample),
        "sync_s": sync_s,
        "sync_rtf": sync_rtf,
        "rss_growth_kib": growth_kib,
        "memory": memory,
        "live_idle": live_idle,
        "live_busy": live_busy,
    }


def _speech_pieces(recording: npt.NDArray[np.float32]) -> list[npt.NDArray[np.float32]]:
    """The pieces the job transcribes (those with speech), cut as the job cuts them."""
    cutter = PieceCutter()
    step = RATE * 10
    pieces = [p for start in range(0, recording.size, step)
              for p in cutter.add(recording[start : start + step])]  # fmt: skip
    pieces += cutter.finish()
    return [piece.samples for piece in pieces if piece.speech]


def _live_beside_jobs(
    jobs: Jobs, base: str, key: str, quick: bool
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """A live session's turns on the idle node, then while `BUSY_JOBS` jobs run."""
    root = base.removesuffix("/api/v1")
    url = root.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
    recording = realtime.QUICK_RECORDING if quick else realtime.RECORDING
    turns = 1 if quick else 5

    async def sessions() -> list[dict[str, float]]:
        return [await realtime.live_session(url, key, recording) for _ in range(turns)]

    asyncio.run(realtime.live_session(url, key, recording))  # warm
    idle = asyncio.run(sessions())
    busy_audio = wav_of(long_recording(QUICK_SECONDS if quick else 600.0), RATE)
    running = [jobs.submit(busy_audio)["id"] for _ in range(BUSY_JOBS)]
    try:
        while not any(jobs.get(job_id)["progress_seconds"] > 0 for job_id in running):
            time.sleep(0.2)  # the jobs are transcribing
        busy = asyncio.run(sessions())
        still = sum(jobs.get(job_id)["status"] == "processing" for job_id in running)
    finally:
        for job_id in running:
            jobs.cancel(job_id)
    busy = [{**turn, "jobs_processing_after": still} for turn in busy]
    return idle, busy


def summary(result: dict[str, Any]) -> dict[str, float]:
    def final_ms(turns: list[dict[str, float]]) -> float:
        return statistics.median(turn["final_after_speech_s"] for turn in turns) * 1000

    idle, busy = final_ms(result["live_idle"]), final_ms(result["live_busy"])
    return {
        "rtf_ratio": result["job_rtf"] / result["sync_rtf"],
        "job_rtf": result["job_rtf"],
        "sync_rtf": result["sync_rtf"],
        "rss_growth_mib": result["rss_growth_kib"] / 1024,
        "first_progress_s": result["first_progress_s"] or float("inf"),
        "submit_s": result["submit_s"],
        "live_idle_final_ms": idle,
        "live_busy_final_ms": busy,
        "live_ratio": busy / idle,
    }
