"""One attempt at a delivery: signed with the webhook's secret (a job's own URL: the
organization's signing secrets) at the moment it is sent
(receivers refuse a timestamp minutes old), POSTed to the URL's checked address, recorded
whatever happens; a failure queues the next attempt after the next wait of the schedule,
until the schedule runs out.

A receiver is trusted with nothing: an attempt ends at its deadline however slowly the
answer comes, and only the status and a few KiB of the answer are read, so neither a
receiver that drips nor one that answers without end holds a slot or memory. An
organization whose receivers hold its share of the slots has its next attempts put off
(`FairShares`), so it never delays another's."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import httpx
from sqlalchemy.ext.asyncio import AsyncSession
from standardwebhooks.webhooks import Webhook as Signer

from voice_service.core.models import SigningSecret, Webhook, WebhookDelivery
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.kit.outbound import OutboundPolicy, OutboundRefused
from voice_service.runtime import Runtime
from voice_service.webhooks import repository
from voice_service.webhooks.fair_shares import FairShares
from voice_service.webhooks.schemas import DELIVERED
from voice_service.webhooks.service import attempt_job, signing_secrets

logger = logging.getLogger(__name__)

USER_AGENT = "voice-service-webhooks/1"
ANSWER_BYTES = 4096  # of a receiver's answer read, so a small one keeps its connection


def signed_headers(
    secrets: Sequence[str], delivery_id: str, body: str, now: datetime
) -> dict[str, str]:
    """The Standard Webhooks headers for `body` sent now: one signature per secret."""
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": " ".join(
            Signer(secret).sign(delivery_id, now, body) for secret in secrets
        ),
    }


@dataclass(frozen=True, slots=True)
class _Receiver:
    url: str
    secrets: list[str]
    enabled: bool


@dataclass(frozen=True, slots=True)
class _Outcome:
    status_code: int | None
    error: str | None
    latency_ms: int

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


async def _receiver(
    session: AsyncSession, delivery: WebhookDelivery, now: datetime
) -> _Receiver | None:
    """Where the delivery goes and what signs it; None once its webhook is deleted."""
    if delivery.webhook_id is not None:
        hook = await session.get(Webhook, delivery.webhook_id)
        return None if hook is None else _Receiver(hook.url, [hook.secret], hook.enabled)
    found = await session.get(SigningSecret, delivery.org_id)
    assert delivery.url is not None and found is not None  # a job's URL needs the secret
    return _Receiver(delivery.url, signing_secrets(found, now), enabled=True)


async def attempt(
    runtime: Runtime,
    queue: SqlQueue,
    client: httpx.AsyncClient,
    shares: FairShares,
    delivery_id: str,
    retry: int,
    deferred: int = 0,
) -> None:
    """Attempt `retry` (0: the first) of the delivery, or put it off (`deferred` times so
    far) while its organization holds its share of the slots."""
    now = runtime.books.clock()
    async with runtime.sessions() as session:
        delivery = await session.get(WebhookDelivery, delivery_id)
        receiver = await _receiver(session, delivery, now) if delivery is not None else None
    if delivery is None or receiver is None:
        return  # deleted, or its webhook was
    if delivery.status == DELIVERED:
        return  # a duplicate attempt (its worker killed after it was recorded)
    with shares.slot(delivery.org_id) as granted:
        outcome = await _send(runtime, client, delivery, receiver, now) if granted else None
    if outcome is None:
        await _put_off(runtime, queue, delivery, retry, deferred)
        return
    schedule = runtime.settings.webhook_retries
    last = retry >= len(schedule) or not receiver.enabled
    async with transaction(runtime.sessions) as session:
        number = await repository.attempted(
            session,
            delivery,
            outcome.status_code,
            outcome.latency_ms,
            outcome.error,
            now,
            delivered=outcome.delivered,
            last=last,
        )
        if not outcome.delivered and not last:
            at = time.time() + schedule[retry]
            await queue.enqueue_in(
                session,
                attempt_job(delivery.id, retry + 1, at=at, round_=_round_of(delivery, retry)),
            )
    if not outcome.delivered:
        logger.info(
            "webhook delivery %s attempt %d: %s",
            delivery.id,
            number,
            outcome.status_code or outcome.error,
        )


async def _send(
    runtime: Runtime,
    client: httpx.AsyncClient,
    delivery: WebhookDelivery,
    receiver: _Receiver,
    now: datetime,
) -> _Outcome:
    """POST the delivery, within the attempt's deadline: its answer's status, or what
    stopped it."""
    deadline = runtime.settings.webhook_timeout_seconds
    started = time.monotonic()
    status_code: int | None = None
    error: str | None = None
    try:
        if not receiver.enabled:
            raise OutboundRefused("the webhook is disabled")
        async with asyncio.timeout(deadline):
            target = await OutboundPolicy(runtime.settings.outbound_allowed).check(receiver.url)
            request = client.build_request(
                "POST",
                target.url,
                content=delivery.payload.encode(),
                headers={
                    "Host": target.host_header,
                    "Content-Type": "application/json",
                    "User-Agent": USER_AGENT,
                    **signed_headers(receiver.secrets, delivery.id, delivery.payload, now),
                },
                extensions={"sni_hostname": target.host},
            )
            status_code = await _status_of(client, request)
    except OutboundRefused as exc:
        error = f"refused: {exc}"
    except TimeoutError:
        error = f"timeout: no whole answer within {deadline:g} s"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:300] or type(exc).__name__
    latency = round((time.monotonic() - started) * 1000)
    return _Outcome(status_code, error, latency)


async def _status_of(client: httpx.AsyncClient, request: httpx.Request) -> int:
    """The answer's status; of its body at most `ANSWER_BYTES` are read (closing the answer
    before its end drops the connection)."""
    answer = await client.send(request, stream=True)
    try:
        read = 0
        async for chunk in answer.aiter_raw():
            read += len(chunk)
            if read > ANSWER_BYTES:
                break
    finally:
        await answer.aclose()
    return answer.status_code


async def _put_off(
    runtime: Runtime, queue: SqlQueue, delivery: WebhookDelivery, retry: int, deferred: int
) -> None:
    """Queue the same attempt again a little later: twice as late each time it is put
    off, never later than a slot's longest hold (the attempt deadline)."""
    wait = min(2.0**deferred, runtime.settings.webhook_timeout_seconds)
    async with transaction(runtime.sessions) as session:
        await queue.enqueue_in(
            session,
            attempt_job(
                delivery.id,
                retry,
                at=time.time() + wait,
                round_=_round_of(delivery, retry),
                deferred=deferred + 1,
            ),
        )


def _round_of(delivery: WebhookDelivery, retry: int) -> int:
    """Which sending of the delivery attempt `retry` belongs to (0, then one more for each
    redelivery): the attempts recorded before it, less the earlier ones of its own round."""
    return delivery.attempts - retry
