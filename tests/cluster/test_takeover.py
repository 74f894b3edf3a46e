"""A transcription job whose node is SIGKILLed mid-way is taken over by the other node once
its lease runs out, and completes once, billed once. (The package's last file by name: no
later test has to wait for the killed node to start again.)"""

from __future__ import annotations

import json

import httpx

from tests.cluster.harness import Cluster, requires_backends, wait_for
from tests.helpers.jobs import conversation, job_at, wav_bytes

pytestmark = requires_backends


def test_a_job_whose_node_is_killed_completes_once_on_the_other(cluster: Cluster) -> None:
    key = cluster.create_key(rate_limit=1_000_000)
    audio = conversation(rounds=3)
    submitted = httpx.post(
        f"{cluster.nodes[0].base_url}/transcription-jobs",
        headers=key.headers,
        files={"file": ("meeting.wav", wav_bytes(audio), "audio/wav")},
        data={"language": "en"},
        timeout=120,
    )
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]

    def worker_pid() -> int | None:
        rows = cluster.db.rows("SELECT job FROM queue_jobs WHERE key = :key", key=job_id)
        worker = json.loads(rows[0][0]).get("worker_id") if rows else None
        return int(worker.split(":")[1]) if worker else None

    def under_way() -> bool:
        progress = job_at(cluster.nodes[0].base_url, key.secret, job_id)["progress_seconds"]
        return progress > 0 and worker_pid() is not None

    wait_for(under_way, 240, "the job never got under way")
    pid = worker_pid()
    (running,) = [node for node in cluster.nodes if pid in node.worker_pids()]
    (other,) = [node for node in cluster.nodes if node is not running]
    running.kill()
    killed_at = job_at(other.base_url, key.secret, job_id)
    assert killed_at["status"] == "processing"

    def ended() -> bool:
        return job_at(other.base_url, key.secret, job_id)["status"] in ("completed", "failed")

    wait_for(ended, 300, "the job was never taken over")
    done = job_at(other.base_url, key.secret, job_id)
    assert done["status"] == "completed", done
    assert done["progress_seconds"] == done["duration_seconds"]
    usage = cluster.db.rows(
        "SELECT endpoint, units FROM usage_records WHERE request_id = :id", id=done["request_id"]
    )
    assert usage == [("speech-to-text", done["units"])]
    assert (
        cluster.db.rows(
            "SELECT units FROM unit_holds WHERE request_id = :id", id=done["request_id"]
        )
        == []
    )
    (payload,) = cluster.db.rows("SELECT job FROM queue_jobs WHERE key = :key", key=job_id)
    taken_over = json.loads(payload[0])
    # Run again after the kill, and ended on the other node. (A heartbeat that a loaded machine
    # holds up past the lease is also taken over: that run is one more attempt, still billed
    # once, as checked above.)
    assert taken_over["attempts"] >= 2, taken_over
    assert int(taken_over["worker_id"].split(":")[1]) in other.worker_pids()
