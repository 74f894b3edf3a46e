"""Workers SIGKILLed mid-request: every answer the client saw is logged once, every success
billed once with its units, nothing else billed, and no usage row outlives its log row."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from tests.cluster.harness import (
    Cluster,
    Load,
    Workload,
    accounting_problems,
    envelope_problems,
    report,
    requires_backends,
    wait_for,
)

pytestmark = requires_backends

KILLS = 5
LOAD_THREADS = 3
# Every kind of request the load sends, answered as it should be.
EXPECTED = {("tts", 200), ("stt", 200), ("voices", 200), ("bad-voice", 404), ("bad-key", 401)}


def answered(load: Load) -> set[tuple[str, int | None]]:
    return {(call.kind, call.status) for call in load.snapshot()}


def test_answers_under_five_worker_kills_are_logged_once_and_billed_exactly(
    cluster: Cluster, workload: Workload
) -> None:
    killed: list[tuple[str, int]] = []
    with Load(workload, cluster.nodes, LOAD_THREADS) as load:
        # Kills start once every kind has been answered: on a loaded machine a transcription
        # can take longer than the kills last, and then none would ever finish.
        wait_for(lambda: answered(load) >= EXPECTED, 240, "the load got no answer of some kind")
        for index in range(KILLS):
            node = cluster.nodes[index % len(cluster.nodes)]
            killed.append((node.name, node.kill_serving_worker()))
            time.sleep(1)
        time.sleep(2)
    for node in cluster.nodes:
        node.wait_workers_ready()  # the supervisor replaced every killed worker
        assert not {pid for name, pid in killed if name == node.name} & set(node.worker_pids())

    calls = load.snapshot()
    problems = accounting_problems(cluster.db, calls, workload.key) + envelope_problems(calls)
    assert not problems, report(problems, calls)
    # The kills cut requests off mid-way.
    assert any(call.status is None for call in calls), report(problems, calls)


def test_a_worker_killed_while_its_log_row_waits_for_a_lock_leaves_no_unlogged_usage(
    cluster: Cluster, workload: Workload
) -> None:
    node = cluster.nodes[0]
    with ThreadPoolExecutor(1) as pool:
        with cluster.db.table_locked("request_log"):
            speaking = pool.submit(workload.send_one, node, "tts")
            cluster.db.wait_for_lock_waiters("request_log")  # synthesized, now committing
            node.kill_serving_worker(timeout=5)
        call = speaking.result(timeout=60)
    assert call.status is None, f"answered before its worker was killed: {call}"
    node.wait_workers_ready()  # by now the killed request's transaction has ended

    assert cluster.db.orphan_usage() == []


def test_a_log_insert_terminated_mid_commit_answers_500_and_bills_nothing(
    cluster: Cluster, workload: Workload
) -> None:
    node = cluster.nodes[1]
    with ThreadPoolExecutor(1) as pool:
        with cluster.db.table_locked("request_log"):
            speaking = pool.submit(workload.send_one, node, "tts")
            for pid in cluster.db.wait_for_lock_waiters("request_log"):
                cluster.db.terminate(pid)
        call = speaking.result(timeout=60)

    assert (call.status, call.error_code) == (500, "INTERNAL_ERROR"), call
    assert call.envelope_id == call.request_id is not None
    problems = accounting_problems(cluster.db, [call], workload.key)  # its 500 row, no usage
    assert not problems, report(problems, [call])
