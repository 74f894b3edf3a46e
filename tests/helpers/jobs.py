"""Transcription jobs in tests: real recordings made into a long one, submitted, awaited."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
from bench.speech_set import real_clips

from tests.helpers.app import Tenant
from voice_service.audio.encode import wav_of

RATE = 16_000
GAP_SECONDS = 1.5  # between recordings: a pause the piece cutter cuts at


@functools.cache
def recordings() -> tuple[npt.NDArray[np.float32], ...]:
    """pocketsphinx-testdata's recordings: three speakers, about 43 s in all."""
    return tuple(clip.audio for clip in real_clips())


def conversation(rounds: int = 1) -> npt.NDArray[np.float32]:
    """The recordings one after another, `rounds` times, a pause after each."""
    gap = np.zeros(round(GAP_SECONDS * RATE), dtype=np.float32)
    parts = [part for recording in recordings() for part in (recording, gap)]
    return np.concatenate(parts * rounds)


def spread(minutes: float) -> npt.NDArray[np.float32]:
    """A recording `minutes` long: the recordings at even intervals, silence between (a
    long meeting's shape, at the cost of transcribing its speech only)."""
    audio = np.zeros(round(minutes * 60 * RATE), dtype=np.float32)
    every = audio.size // len(recordings())
    for index, recording in enumerate(recordings()):
        start = index * every + every // 3
        audio[start : start + recording.size] = recording
    return audio


def one_recording() -> npt.NDArray[np.float32]:
    """The first recording (7 s, one speaker) and a pause: a job of one piece."""
    gap = np.zeros(round(GAP_SECONDS * RATE), dtype=np.float32)
    return np.concatenate([recordings()[0], gap])


def wav_bytes(samples: npt.NDArray[np.float32]) -> bytes:
    """16-bit mono WAV at 16 kHz, as a job's piece is sent to a provider."""
    return wav_of(samples, RATE)


async def submit(
    client: httpx.AsyncClient,
    tenant: Tenant,
    audio: bytes,
    *,
    headers: dict[str, str] | None = None,
    **fields: str,
) -> httpx.Response:
    return await client.post(
        "/transcription-jobs",
        headers={**tenant.headers, **(headers or {})},
        files={"file": ("recording.wav", audio, "audio/wav")},
        data=fields,
    )


async def settled(
    client: httpx.AsyncClient, tenant: Tenant, job_id: str, seconds: float = 300
) -> dict[str, Any]:
    """The job once it has ended."""
    async with asyncio.timeout(seconds):
        while True:
            response = await client.get(f"/transcription-jobs/{job_id}", headers=tenant.headers)
            assert response.status_code == 200, response.text
            job: dict[str, Any] = response.json()
            if job["status"] in ("completed", "failed", "cancelled"):
                return job
            await asyncio.sleep(1)  # within the key's rate limit


def job_at(base_url: str, secret: str, job_id: str) -> dict[str, Any]:
    """The job as a node at `base_url` shows it (for tests driving real servers)."""
    answer = httpx.get(
        f"{base_url}/transcription-jobs/{job_id}",
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    job: dict[str, Any] = answer.json()
    return job
