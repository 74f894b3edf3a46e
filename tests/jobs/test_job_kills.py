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
from tests.helpers.loopback_http import http_server
from tests.helpers.servers import Server, running_server

LEASE = "4"  # seconds a killed node's job waits before it is taken over
ALLOW_LOOPBACK = {"outbound_allowed_hosts": "127.0.0.1"}  # the webhook receiver's


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
    audio = conversation(rounds=1)
    received: list[dict[str, str]] = []

    def receive(_method: str, _path: str, headers: dict[str, str], _body: bytes) -> Any:
        received.append(headers)
        return 200, {}, b""

    with (
        http_server(receive) as port,
        running_server(tmp_path, job_lease_seconds=LEASE, **ALLOW_LOOPBACK) as server,
    ):
        key = server.api_key
        hook = httpx.post(
            f"{server.base_url}/webhooks",
            headers={"Authorization": f"Bearer {key}"},
            json={"url": f"http://127.0.0.1:{port}/hook", "events": ["transcription.completed"]},
        )
        assert hook.status_code == 201, hook.text
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

        with running_server(tmp_path, job_lease_seconds=LEASE, **ALLOW_LOOPBACK) as again:
            done = wait_for_job(
                again, key, job_id, lambda job: job["status"] in ("completed", "failed")
            )
            settled_again(again, key, job_id, done, received)


def settled_again(
    again: Server, key: str, job_id: str, done: dict[str, Any], received: list[dict[str, str]]
) -> None:
    """Completed once, billed once, told once."""
    assert done["status"] == "completed", done
    assert done["progress_seconds"] == done["duration_seconds"]
    usage = again.query(
        "SELECT endpoint, units, request_id FROM usage_records WHERE org_id = ?",
        again.org_id,
    )
    assert [tuple(row) for row in usage] == [("speech-to-text", done["units"], done["request_id"])]
    holds = again.query("SELECT * FROM unit_holds")
    assert holds == []
    # Run twice (the first cut off): the queue says so.
    (queued,) = again.query("SELECT job FROM queue_jobs WHERE key = ?", job_id)
    assert json.loads(queued["job"])["attempts"] == 2
    # One event made (by the run that settled the job), and delivered; any repeat of it
    # would carry the same webhook-id.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        deliveries = again.query("SELECT id, status FROM webhook_deliveries")
        if [row["status"] for row in deliveries] == ["delivered"]:
            break
        time.sleep(0.2)
    assert [row["status"] for row in deliveries] == ["delivered"]
    assert {headers["webhook-id"] for headers in received} == {deliveries[0]["id"]}
