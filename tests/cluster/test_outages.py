"""Redis and PostgreSQL going away under the nodes, through the proxies: requests keep
answering within the timeouts, rate limits stay within the key's budget, /readyz says
what is wrong, and every request's log row reaches the database exactly once."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from tests.cluster.harness import (
    DB_TIMEOUT,
    MARGIN,
    READYZ_LIMIT,
    REDIS_TIMEOUT,
    Call,
    Cluster,
    Kind,
    Load,
    Node,
    Ready,
    Workload,
    accounting_problems,
    calm,
    envelope_problems,
    report,
    requires_backends,
    wait_for,
)

pytestmark = requires_backends

LIMIT = 8  # per minute; while Redis is away each of the 4 processes allows LIMIT // 4
PROCESSES = 4
READYZ_BOUND = READYZ_LIMIT + MARGIN


def probe(
    workload: Workload, nodes: Sequence[Node], kinds: Sequence[Kind], bound: float
) -> tuple[list[Call], list[Ready]]:
    """`kinds` sent to every node, and /readyz asked of every node, all at once; the client
    gives up a little after `bound`, so that a hang fails the test instead of stalling it."""
    with ThreadPoolExecutor(len(nodes) * (len(kinds) + 1)) as pool:
        calls = [
            pool.submit(workload.send_one, node, kind, timeout=bound + 5)
            for node in nodes
            for kind in kinds
        ]
        readies = [pool.submit(node.readyz, READYZ_BOUND + 5) for node in nodes]
        return [call.result() for call in calls], [ready.result() for ready in readies]


def slow_or_unanswered(calls: Sequence[Call], bound: float) -> list[str]:
    return [
        f"{call.kind} on {call.node}: {call.status} after {call.elapsed:.1f} s {call.failure}"
        for call in calls
        if call.status is None or call.elapsed > bound
    ]


def speak_until_success(workload: Workload, node: Node, timeout: float) -> list[Call]:
    calls = [workload.send_one(node, "tts")]
    deadline = time.monotonic() + timeout
    while not calls[-1].ok and time.monotonic() < deadline:
        time.sleep(1)
        calls.append(workload.send_one(node, "tts"))
    return calls


def test_while_redis_refuses_requests_succeed_and_readyz_warns_until_it_is_back(
    cluster: Cluster, workload: Workload
) -> None:
    cluster.redis.set_mode("refuse")
    calls, readies = probe(workload, cluster.nodes, ["tts", "voices", "voices"], 30)
    readies += [node.readyz() for node in cluster.nodes for _ in range(3)]
    cluster.redis.set_mode("forward")

    assert [call.status for call in calls] == [200] * len(calls), report([], calls)
    for ready in readies:
        assert ready.status == 200 and ready.warnings, ready
    for node in cluster.nodes:
        wait_for(partial(calm, node), 60, f"{node.name} still warns with Redis back")


def test_while_redis_refuses_a_key_gets_at_most_its_limit_and_exactly_it_once_back(
    cluster: Cluster, workload: Workload
) -> None:
    limited, fresh = cluster.create_key(rate_limit=LIMIT), cluster.create_key(rate_limit=LIMIT)
    nodes = cluster.nodes
    cluster.redis.set_mode("refuse")
    for node in nodes:
        wait_for(partial(warns, node), 30, f"{node.name} did not notice Redis was gone")

    burst = [workload.send_one(nodes[i % len(nodes)], "voices", limited) for i in range(3 * LIMIT)]
    allowed = sum(call.status == 200 for call in burst)
    # At most the key's limit in all; a process hit 6 times or more has allowed its share.
    assert LIMIT // PROCESSES <= allowed <= LIMIT, report([], burst)
    assert {call.status for call in burst} <= {200, 429}, report([], burst)
    problems = envelope_problems(burst)
    assert not problems, report(problems, burst)

    cluster.redis.set_mode("forward")
    for node in nodes:
        wait_for(partial(calm, node), 60, f"{node.name} still warns with Redis back")
    again = [workload.send_one(nodes[i % len(nodes)], "voices", fresh) for i in range(LIMIT + 3)]
    assert [call.status for call in again] == [200] * LIMIT + [429] * 3, report([], again)


def warns(node: Node) -> bool:
    """Ready, with a warning, several times over (fresh connections reach both workers)."""
    answers = [node.readyz() for _ in range(4)]
    return all(answer.status == 200 and answer.warnings for answer in answers)


def test_a_redis_black_hole_delays_no_answer_past_the_redis_timeout(
    cluster: Cluster, workload: Workload
) -> None:
    bound = REDIS_TIMEOUT + MARGIN
    cluster.redis.set_mode("pause")
    calls, readies = probe(workload, cluster.nodes, ["voices", "tts", "voices"], bound)
    cluster.redis.set_mode("forward")

    problems = slow_or_unanswered(calls, bound) + envelope_problems(calls)
    assert not problems, report(problems, calls)
    assert {call.status for call in calls} <= {200, 500}, report([], calls)
    for ready in readies:
        assert ready.status == 200 and ready.warnings, ready
        assert ready.elapsed <= READYZ_BOUND, ready


def test_while_the_database_refuses_answers_are_fast_and_every_one_is_logged_after(
    cluster: Cluster, workload: Workload
) -> None:
    bound = DB_TIMEOUT + MARGIN
    kinds: list[Kind] = ["voices", "tts", "bad-voice", "bad-key"]
    cluster.pg.set_mode("refuse")
    with Load(workload, cluster.nodes, threads=2, kinds=kinds, pace=0.2, timeout=bound + 5) as load:
        time.sleep(10)
    cluster.pg.set_mode("forward")

    calls = load.snapshot()
    problems = slow_or_unanswered(calls, bound) + envelope_problems(calls)
    problems += [
        f"{call.kind}: 500 {call.error_code}"
        for call in calls
        if call.status == 500 and call.error_code != "INTERNAL_ERROR"
    ]
    assert not problems, report(problems, calls)
    assert any(call.status == 500 for call in calls), report(["no 500 seen"], calls)
    # Rows spooled during the outage are replayed, each once, and 500s bill nothing.
    problems = accounting_problems(cluster.db, calls, workload.key)
    assert not problems, report(problems, calls)


def test_a_database_black_hole_answers_within_the_database_timeout_and_recovers(
    cluster: Cluster, workload: Workload
) -> None:
    bound = DB_TIMEOUT + MARGIN
    cluster.pg.set_mode("pause")
    calls, readies = probe(workload, cluster.nodes, ["voices", "tts"], bound)
    cluster.pg.set_mode("forward")

    problems = slow_or_unanswered(calls, bound) + envelope_problems(calls)
    assert not problems, report(problems, calls)
    for ready in readies:
        assert ready.status == 503 and ready.elapsed <= READYZ_BOUND, ready
    for node in cluster.nodes:
        recovery = speak_until_success(workload, node, timeout=60)
        calls += recovery
        assert recovery[-1].ok, report([f"{node.name} did not recover"], recovery)
    problems = accounting_problems(cluster.db, calls, workload.key)
    assert not problems, report(problems, calls)


def test_a_node_killed_with_spooled_log_rows_replays_them_once_after_restart(
    cluster: Cluster, workload: Workload
) -> None:
    node = cluster.nodes[1]
    cluster.pg.set_mode("refuse")
    calls = [workload.send_one(node, kind) for kind in ("voices", "tts", "bad-key", "voices")]
    node.kill()  # supervisor and workers at once: nothing is flushed on the way out
    cluster.pg.set_mode("forward")
    node.start()
    node.wait_started()

    assert all(call.status is not None for call in calls), report([], calls)
    assert any(call.status == 500 for call in calls), report(["no 500 seen"], calls)
    problems = accounting_problems(cluster.db, calls, workload.key)
    assert not problems, report(problems, calls)
