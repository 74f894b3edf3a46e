"""Webhooks told of jobs: deliveries signed by the Standard Webhooks scheme (verified with
the `standardwebhooks` package and with OpenAI's SDK), retried on a failing receiver with
the same webhook-id, recorded attempt by attempt, and sent again on request; URLs that lead
inside the network refused unless the operator allows their host."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from openai import OpenAI
from saq.job import Status
from standardwebhooks.webhooks import Webhook as Verifier

from tests.helpers.api import assert_error
from tests.helpers.app import Tenant, Tenants, make_settings
from tests.helpers.jobs import one_recording, settled, submit, wav_bytes
from tests.helpers.loopback_http import http_server
from voice_service.core.models import utcnow
from voice_service.jobs.retention import sweep
from voice_service.settings import Settings
from voice_service.web.context import AppContext
from voice_service.webhooks.delivery import signed_headers
from voice_service.webhooks.service import new_secret, payload

pytestmark = pytest.mark.anyio


@dataclass
class Receiver:
    """A webhook receiver on loopback: answers with `statuses` in turn (then 200), and
    keeps what it was sent."""

    statuses: list[int]
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/voice"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(statuses=[500, 500])

    def receive(_method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
        state.received.append((headers, body))
        state.paths.append(path)
        return (state.statuses.pop(0) if state.statuses else 200), {}, b""

    with http_server(receive) as port:
        state.port = port
        yield state


@pytest.fixture
def settings(tmp_path: Path, own_database: str) -> Settings:
    return make_settings(
        tmp_path, own_database, outbound_allowed_hosts="127.0.0.1", webhook_retry_seconds="1,1,1"
    )


async def register(
    client: httpx.AsyncClient, tenant: Tenant, url: str, *events: str
) -> httpx.Response:
    return await client.post(
        "/webhooks",
        headers=tenant.headers,
        json={"url": url, "events": list(events or ["transcription.completed"])},
    )


async def received(receiver: Receiver, count: int, seconds: float = 120) -> None:
    async with asyncio.timeout(seconds):
        while len(receiver.received) < count:  # noqa: ASYNC110 (another thread's server)
            await asyncio.sleep(0.1)


async def deliveries_ended(
    client: httpx.AsyncClient, tenant: Tenant, path: str, seconds: float = 60
) -> list[dict[str, Any]]:
    """The deliveries at `path` once none is pending: a receiver's 200 is recorded after it
    answers, so what it received may be ahead of what the server has written down."""
    async with asyncio.timeout(seconds):
        while True:
            found: list[dict[str, Any]] = (await client.get(path, headers=tenant.headers)).json()[
                "deliveries"
            ]
            if all(d["status"] != "pending" for d in found):
                return found
            await asyncio.sleep(0.1)


async def test_a_completed_job_is_delivered_signed_after_two_failures(
    client: httpx.AsyncClient, tenant: Tenant, receiver: Receiver
) -> None:
    made = await register(client, tenant, receiver.url)
    assert made.status_code == 201, made.text
    hook = made.json()
    secret = hook["secret"]
    assert secret.startswith("whsec_")
    listed = (await client.get("/webhooks", headers=tenant.headers)).json()["webhooks"]
    assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]

    job = (await submit(client, tenant, wav_bytes(one_recording()))).json()
    done = await settled(client, tenant, job["id"])
    assert done["status"] == "completed"
    await received(receiver, 3)
    (delivery,) = await deliveries_ended(client, tenant, f"/webhooks/{hook['id']}/deliveries")
    assert len(receiver.received) == 3  # no fourth attempt once one was taken

    ids = {headers["webhook-id"] for headers, _ in receiver.received}
    assert len(ids) == 1  # every attempt is the same message
    headers, body = receiver.received[-1]
    event = Verifier(secret).verify(body, headers)
    assert event["type"] == "transcription.completed"
    assert event["data"]["id"] == job["id"] and event["data"]["units"] == done["units"]
    unwrapped = OpenAI(api_key="unused", webhook_secret=secret).webhooks.unwrap(body, headers)
    assert unwrapped.type == "transcription.completed"  # type: ignore[comparison-overlap]
    with pytest.raises(Exception, match="signature"):
        Verifier("whsec_" + "A" * 32).verify(body, headers)  # another secret

    assert delivery["id"] == ids.pop() and delivery["status"] == "delivered"
    assert [a["status_code"] for a in delivery["attempts"]] == [500, 500, 200]
    assert all(a["latency_ms"] >= 0 for a in delivery["attempts"])

    again = await client.post(
        f"/webhooks/{hook['id']}/deliveries/{delivery['id']}/redeliver", headers=tenant.headers
    )
    assert again.status_code == 202, again.text
    await received(receiver, 4)
    assert receiver.received[-1][0]["webhook-id"] == delivery["id"]
    Verifier(secret).verify(receiver.received[-1][1], receiver.received[-1][0])


async def test_a_failed_job_is_delivered_to_hooks_that_want_it(
    client: httpx.AsyncClient, tenant: Tenant, receiver: Receiver, app: FastAPI
) -> None:
    receiver.statuses.clear()
    completed_only = await register(client, tenant, receiver.url + "/completed")
    failed_too = await register(
        client, tenant, receiver.url, "transcription.completed", "transcription.failed"
    )
    assert completed_only.status_code == failed_too.status_code == 201
    context: AppContext = app.state.context
    assert context.jobs is not None
    await context.jobs.stop()  # nothing runs the job: the queue gives up on it
    job_id = (await submit(client, tenant, wav_bytes(one_recording()))).json()["id"]
    queued = await context.jobs.queue.job(job_id)
    assert queued is not None
    await context.jobs.queue.finish(queued, Status.ABORTED, error="swept")
    assert await sweep(context, context.jobs.queue, context.jobs.webhooks) == 1
    await received(receiver, 1)
    await asyncio.sleep(1)
    (only,) = receiver.received
    event = json.loads(only[1])
    assert event["type"] == "transcription.failed" and event["data"]["id"] == job_id
    assert event["data"]["error"]["code"] == "INTERNAL_ERROR"


async def test_a_jobs_own_url_is_told_signed_with_the_organizations_secret(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, receiver: Receiver
) -> None:
    receiver.statuses.clear()
    hook = (await register(client, tenant, receiver.url + "/org")).json()
    audio = wav_bytes(one_recording())
    unsigned = await submit(client, tenant, audio, webhook_url=receiver.url)
    assert_error(unsigned, 400, "INVALID_REQUEST")  # no secret to sign with yet
    assert "signing-secret" in unsigned.json()["error"]["message"]
    none_yet = await client.get("/webhooks/signing-secret", headers=tenant.headers)
    assert_error(none_yet, 404, "NOT_FOUND")

    made = await client.post("/webhooks/signing-secret", headers=tenant.headers)
    assert made.status_code == 201, made.text
    first = made.json()["secret"]
    shown = (await client.get("/webhooks/signing-secret", headers=tenant.headers)).json()
    assert "secret" not in shown and shown["previous_valid_until"] is None
    inside = await submit(client, tenant, audio, webhook_url="https://10.0.0.8/hook")
    assert_error(inside, 400, "INVALID_REQUEST")

    job = (await submit(client, tenant, audio, webhook_url=receiver.url)).json()
    assert job["webhook_url"] == receiver.url
    assert (await settled(client, tenant, job["id"]))["status"] == "completed"
    await received(receiver, 2)
    by_path = dict(zip(receiver.paths, receiver.received, strict=True))
    own_headers, own_body = by_path["/hooks/voice"]
    assert Verifier(first).verify(own_body, own_headers)["data"]["id"] == job["id"]
    with pytest.raises(Exception, match="signature"):
        Verifier(hook["secret"]).verify(own_body, own_headers)  # not the webhook's secret
    Verifier(hook["secret"]).verify(by_path["/hooks/voice/org"][1], by_path["/hooks/voice/org"][0])

    path = f"/transcription-jobs/{job['id']}/deliveries"
    deliveries = await deliveries_ended(client, tenant, path)
    own = next(d for d in deliveries if d["webhook_id"] is None)
    assert own["url"] == receiver.url and own["job_id"] == job["id"]
    assert own["id"] == own_headers["webhook-id"]
    assert {d["webhook_id"] for d in deliveries} == {None, hook["id"]}
    assert all(d["status"] == "delivered" for d in deliveries)

    rotated = (await client.post("/webhooks/signing-secret", headers=tenant.headers)).json()
    assert rotated["secret"] != first and rotated["previous_valid_until"] is not None
    again = await client.post(f"{path}/{own['id']}/redeliver", headers=tenant.headers)
    assert again.status_code == 202, again.text
    await received(receiver, 3)
    headers, body = receiver.received[-1]
    for secret in (rotated["secret"], first):  # both sign while receivers switch over
        Verifier(secret).verify(body, headers)

    other = await tenants.create()
    assert_error(await client.get(path, headers=other.headers), 404, "NOT_FOUND")
    stolen = await client.post(f"{path}/{own['id']}/redeliver", headers=other.headers)
    assert_error(stolen, 404, "NOT_FOUND")
    deleted = await client.delete(f"/transcription-jobs/{job['id']}", headers=tenant.headers)
    assert deleted.status_code == 204
    kept = await client.get(f"/webhooks/{hook['id']}/deliveries", headers=tenant.headers)
    assert len(kept.json()["deliveries"]) == 1  # the webhook's history outlives the job


async def test_urls_inside_the_network_are_refused_unless_allowed(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    for url in (
        "https://127.0.0.2/hook",  # loopback, not the allowed 127.0.0.1
        "https://localhost/hook",
        "https://[::1]/hook",
        "https://10.0.0.8/hook",
        "https://169.254.169.254/latest/meta-data",
        "http://example.com/hook",  # http, to a host nobody allowed
        "ftp://127.0.0.1/hook",
    ):
        assert_error(await register(client, tenant, url), 400, "INVALID_REQUEST")
    refused = await register(client, tenant, "https://127.0.0.1/x", "transcription.started")
    assert_error(refused, 400, "INVALID_REQUEST")  # no such event
    made = (await register(client, tenant, "http://127.0.0.1:9/hook")).json()
    other = await tenants.create()
    for method in ("GET", "DELETE"):
        answer = await client.request(method, f"/webhooks/{made['id']}", headers=other.headers)
        assert_error(answer, 404, "NOT_FOUND")
    moved = await client.patch(
        f"/webhooks/{made['id']}", headers=tenant.headers, json={"url": "https://10.1.1.1/"}
    )
    assert_error(moved, 400, "INVALID_REQUEST")
    off = await client.patch(
        f"/webhooks/{made['id']}", headers=tenant.headers, json={"enabled": False}
    )
    assert off.json()["enabled"] is False
    gone = await client.delete(f"/webhooks/{made['id']}", headers=tenant.headers)
    assert gone.status_code == 204
    assert (await client.get("/webhooks", headers=tenant.headers)).json()["webhooks"] == []


async def test_the_api_guides_receiver_takes_a_signed_delivery_and_refuses_a_forged_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    guide = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    (code,) = [
        block
        for block in re.findall(r"```python\n(.*?)```", guide, re.DOTALL)
        if block.startswith("# receiver.py")
    ]
    secret = new_secret()
    monkeypatch.setenv("VOICE_WEBHOOK_SECRET", secret)
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 (the guide's own code)
    body = payload("msg_test", "transcription.completed", {"id": "job_x"}, utcnow())
    headers = signed_headers([secret], "msg_test", body, utcnow())
    transport = httpx.ASGITransport(app=namespace["app"])
    async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as client:
        taken = await client.post("/hooks/voice", content=body, headers=headers)
        forged = await client.post(
            "/hooks/voice", content=body.replace("job_x", "job_y"), headers=headers
        )
    assert (taken.status_code, forged.status_code) == (200, 400)
