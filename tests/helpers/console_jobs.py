"""For the console's Jobs and Webhooks tests: a webhook receiver on loopback that keeps what
it was sent, and a short recording transcribed in the background through the API."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import numpy as np

from tests.helpers.jobs import RATE, recordings, wav_bytes
from tests.helpers.loopback_http import http_server
from tests.helpers.servers import Server

T = TypeVar("T")
ENDED = ("completed", "failed", "cancelled")
# Twice a second: within an API key's default rate limit (100 a minute) however long it waits.
POLL_SECONDS = 0.5


@dataclass
class Receiver:
    """Answers 500 to a path in `failing`, 200 to any other; keeps every request."""

    port: int = 0
    failing: set[str] = field(default_factory=set)
    # (path, lower-cased headers, status answered), in the order they came
    received: list[tuple[str, dict[str, str], int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def answer(self, path: str, headers: dict[str, str]) -> int:
        with self._lock:
            status = 500 if path in self.failing else 200
            self.received.append((path, headers, status))
            return status

    def answers_to(self, delivery_id: str) -> list[int]:
        """What it answered each attempt of the delivery (its webhook-id header)."""
        with self._lock:
            return [s for _, h, s in self.received if h.get("webhook-id") == delivery_id]


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()

    def handle(_method: str, path: str, headers: dict[str, str], _body: bytes) -> Any:
        return receiver.answer(path, headers), {}, b""

    with http_server(handle) as port:
        receiver.port = port
        yield receiver


def short_recording(seconds: float = 3.0) -> bytes:
    """The start of the first recording: a few seconds of speech, one piece of a job."""
    return wav_bytes(recordings()[0][: round(seconds * RATE)].astype(np.float32))


def submit_job(server: Server, secret: str, audio: bytes) -> dict[str, Any]:
    answer = httpx.post(
        f"{server.base_url}/transcription-jobs",
        headers={"Authorization": f"Bearer {secret}"},
        files={"file": ("recording.wav", audio, "audio/wav")},
        timeout=60,
    )
    assert answer.status_code == 202, answer.text
    job: dict[str, Any] = answer.json()
    return job


def api_get(server: Server, secret: str, path: str, **params: str) -> httpx.Response:
    return httpx.get(
        f"{server.base_url}{path}",
        headers={"Authorization": f"Bearer {secret}"},
        params=params,
        timeout=60,
    )


def settled_job(server: Server, secret: str, job_id: str) -> dict[str, Any]:
    """The job once it has ended, as the API shows it."""

    def ended() -> dict[str, Any] | None:
        job: dict[str, Any] = api_get(server, secret, f"/transcription-jobs/{job_id}").json()
        return job if job["status"] in ENDED else None

    return polled(ended, f"job {job_id} never ended")


def polled(probe: Callable[[], T | None], failure: str, patience: float = 180) -> T:
    """`probe`'s first value that is not None, asked twice a second for at most `patience`
    seconds (a bound for a loaded CI machine, not a timing the test checks)."""
    deadline = time.monotonic() + patience
    while (value := probe()) is None:
        assert time.monotonic() < deadline, failure
        time.sleep(POLL_SECONDS)
    return value


def deliveries(server: Server, secret: str, webhook_id: str) -> list[dict[str, Any]]:
    """The webhook's deliveries as the API lists them, newest first."""
    answer = api_get(server, secret, f"/webhooks/{webhook_id}/deliveries")
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["deliveries"]
    return found
