"""A node SIGKILLed in the middle of a job: the job is taken up again (by the same node once
it is back, on the embedded default; by the other node, in a cluster) and completes once,
billed once."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.jobs import conversation, job_at, wav_bytes
from tests.helpers.servers import Server, running_server

LEASE = "4"  # seconds a killed node's job waits before it is taken over


def wait_for_job(
    server: Server, key: str, job_id: str, done: Any, timeout: float = 300
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = job_at(server.base_url, key, job_id)
        if done(job):
            return job
        time.sleep(1)  # within the key's rate limit
    raise AssertionError(f"the job never got there: {job}")


def test_a_job_cut_off_by_a_kill_completes_once_after_a_restart(tmp_path: Path) -> None:
    audio = conversation(rounds=3)
    with running_server(tmp_path, job_lease_seconds=LEASE) as server:
        key = server.api_key
        submitted = httpx.post(
            f"{server.base_url}/transcription-jobs",
            headers={"Authorization": f"Bearer {key}"},
            files={"file": ("meeting.wav", wav_bytes(audio), "audio/wav")},
            data={"language": "en"},
            timeout=120,
        )
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        # Killed once some of it is done, and not all.
        under_way = wait_for_job(server, key, job_id, lambda job: job["progress_seconds"] > 0)
        server.process.kill()
        server.process.wait()
    assert under_way["status"] == "processing"
    assert under_way["progress_seconds"] < audio.size / 16_000

    with running_server(tmp_path, job_lease_seconds=LEASE) as again:
        done = wait_for_job(
            again, key, job_id, lambda job: job["status"] in ("completed", "failed")
        )
        assert done["status"] == "completed", done
        assert done["progress_seconds"] == done["duration_seconds"]
        usage = again.query(
            "SELECT endpoint, units, request_id FROM usage_records WHERE org_id = ?",
            again.org_id,
        )
        assert [tuple(row) for row in usage] == [
            ("speech-to-text", done["units"], done["request_id"])
        ]
        holds = again.query("SELECT * FROM unit_holds")
        assert holds == []
        # Run twice (the first cut off): the queue says so.
        (queued,) = again.query("SELECT job FROM queue_jobs WHERE key = ?", job_id)
        assert json.loads(queued["job"])["attempts"] == 2
