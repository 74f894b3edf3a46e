"""Idempotency keys and unit caps on the cluster: requests raced over both workers of both
nodes (real processes on PostgreSQL and Redis) are billed once, and never past a cap."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from tests.cluster.harness import Cluster, Key, requires_backends
from tests.helpers.app import TEST_PEPPER
from tests.helpers.voices import JOE
from voice_service.kit.db import run_in_transaction
from voice_service.tenancy import service as tenancy
from voice_service.tenancy.keys import SecretHasher

pytestmark = requires_backends

RACERS = 8  # over 2 nodes x 2 workers, on fresh connections
HELLO = "Hello."  # 6 units


def new_key(cluster: Cluster, monthly_units: int | None = None) -> Key:
    """A key of a new organization, so that its usage is this test's alone."""

    async def work(session: AsyncSession) -> Key:
        org = await tenancy.create_org(session, "billing controls", None, None)
        created = await tenancy.create_key(
            session,
            SecretHasher(TEST_PEPPER.encode()),
            org.id,
            None,
            1_000_000,
            monthly_units=monthly_units,
        )
        return Key(created.key.id, created.secret)

    key: Key = cluster.db.run(run_in_transaction(cluster.admin_settings, work))
    return key


def race(cluster: Cluster, headers: dict[str, str], text: str) -> list[httpx.Response]:
    urls = [node.base_url for node in cluster.nodes] * (RACERS // len(cluster.nodes))

    def speak(url: str) -> httpx.Response:
        body = {"text": text, "voice_id": JOE}
        return httpx.post(f"{url}/text-to-speech", headers=headers, json=body, timeout=120)

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(speak, urls))


def billed(cluster: Cluster, key: Key) -> list[int]:
    return [
        units
        for rows in cluster.db.usage().values()
        for _, units, key_id in rows
        if key_id == key.id
    ]


def test_one_idempotency_key_raced_over_the_cluster_is_billed_once(cluster: Cluster) -> None:
    key = new_key(cluster)
    text = "One request, however many times it is sent."
    answers = race(cluster, {**key.headers, "Idempotency-Key": "raced"}, text)
    assert {answer.status_code for answer in answers} == {200}
    assert len({answer.content for answer in answers}) == 1
    firsts = [a for a in answers if "Idempotent-Replayed" not in a.headers]
    assert len(firsts) == 1
    assert billed(cluster, key) == [len(text)]
    replays = [a.headers["X-Request-ID"] for a in answers if a not in firsts]
    statuses = cluster.db.log_statuses(replays)
    assert all(statuses[request_id] == [200] for request_id in replays)


def test_the_last_units_raced_over_the_cluster_never_pass_the_cap(cluster: Cluster) -> None:
    key = new_key(cluster, monthly_units=20)
    answers = race(cluster, key.headers, HELLO)
    assert sorted(answer.status_code for answer in answers) == [200] * 3 + [429] * 5
    assert billed(cluster, key) == [6, 6, 6]
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert refused.headers["X-Units-Remaining"] == "2"
    assert "monthly cap of 20 units" in refused.json()["error"]["message"]
