"""ElevenLabs' `previous_text` and `next_text`, or the ids of the requests that said them: a
sentence split across two requests is said as one, each request billed for its own text
only."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.helpers.api import assert_error, usage_units
from tests.helpers.app import Tenant, Tenants, make_settings, running
from tests.helpers.voices import JOE
from voice_service.app import create_app
from voice_service.core.models import SpokenText, utcnow
from voice_service.inference.engines import Engines

pytestmark = pytest.mark.anyio

FIRST = "I went to the market"
SECOND = "and bought some fresh bread for dinner."
RATE = 22_050


async def said(client: httpx.AsyncClient, tenant: Tenant, **body: object) -> tuple[bytes, str]:
    """The audio of a request and its request id, which later requests may name."""
    response = await client.post(
        "/text-to-speech",
        params={"output_format": "pcm_22050"},
        headers=tenant.headers,
        json={"voice_id": JOE, **body},
    )
    assert response.status_code == 200, response.text
    return response.content, response.headers["X-Request-ID"]


async def pcm(client: httpx.AsyncClient, tenant: Tenant, **body: object) -> bytes:
    return (await said(client, tenant, **body))[0]


async def test_two_requests_with_each_others_text_sound_as_one(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    once = await pcm(client, tenant, text=f"{FIRST} {SECOND}")
    first = await pcm(client, tenant, text=FIRST, next_text=SECOND)
    second = await pcm(client, tenant, text=SECOND, previous_text=FIRST)

    assert abs(len(first) + len(second) - len(once)) <= 2
    fade = 2 * round(0.005 * RATE)  # bytes of the faded edges at the cut
    assert first[:-fade] == once[: len(first) - fade]
    assert second[fade:] == once[len(once) - len(second) + fade :]
    units = sorted(units for _, units in await usage_units(tenants, tenant.org_id))
    assert units == sorted([len(f"{FIRST} {SECOND}"), len(FIRST), len(SECOND)])


async def test_timestamps_time_the_text_alone(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/text-to-speech/with-timestamps",
        params={"output_format": "pcm_16000"},
        headers=tenant.headers,
        json={"voice_id": JOE, "text": FIRST, "next_text": SECOND},
    )
    assert response.status_code == 200, response.text
    alignment = response.json()["alignment"]
    assert "".join(alignment["characters"]) == FIRST
    alone = await client.post(
        "/text-to-speech/with-timestamps",
        params={"output_format": "pcm_16000"},
        headers=tenant.headers,
        json={"voice_id": JOE, "text": FIRST},
    )
    # Said going on into the next sentence, its last word is not drawn out as a final one.
    last_end = alignment["character_end_times_seconds"][-1]
    assert last_end < alone.json()["alignment"]["character_end_times_seconds"][-1]


@pytest.mark.parametrize("field", ["previous_text", "next_text"])
async def test_neighbours_over_the_text_limit_are_400_and_not_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, field: str
) -> None:
    response = await client.post(
        "/text-to-speech",
        headers=tenant.headers,
        json={"voice_id": JOE, "text": FIRST, field: "x" * 5001},
    )
    assert field in assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert await usage_units(tenants, tenant.org_id) == []


async def kept(tenants: Tenants, org_id: str) -> list[str]:
    rows = await tenants.run(
        lambda s: s.scalars(select(SpokenText.request_id).where(SpokenText.org_id == org_id))
    )
    return list(rows)


async def test_requests_named_by_id_are_said_as_their_text_is(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    first, first_id = await said(client, tenant, text=FIRST)
    second, second_id = await said(client, tenant, text=SECOND, previous_request_ids=[first_id])
    assert second == await pcm(client, tenant, text=SECOND, previous_text=FIRST)
    # As ElevenLabs has it, the ids win over text sent beside them.
    going_on, _ = await said(
        client, tenant, text=FIRST, next_request_ids=[second_id], next_text="Stop."
    )
    assert going_on == await pcm(client, tenant, text=FIRST, next_text=SECOND) != first

    # A stream is remembered once its last byte went out and it was billed.
    streamed = await client.post(
        "/text-to-speech/stream", headers=tenant.headers, json={"voice_id": JOE, "text": FIRST}
    )
    assert streamed.status_code == 200, streamed.text
    stream_id = streamed.headers["X-Request-ID"]
    for _ in range(200):  # billed just after its last byte: wait for the server's record
        if stream_id in await kept(tenants, tenant.org_id):
            break
        await asyncio.sleep(0.05)
    after_stream, _ = await said(client, tenant, text=SECOND, previous_request_ids=[stream_id])
    assert after_stream == second


async def test_a_request_not_kept_for_the_organization_is_refused_and_not_billed(
    app: FastAPI, client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    stranger = await tenants.create()
    _, theirs = await said(client, stranger, text=FIRST)
    _, mine = await said(client, tenant, text=FIRST)
    books = app.state.context.books
    later = utcnow() + timedelta(minutes=121)
    for ids, clock in (
        (["req_0123456789abcdef01234567"], books.clock),
        ([theirs], books.clock),
        ([mine], lambda: later),  # past VOICE_SERVICE_STITCHING_MINUTES
    ):
        books.clock = clock
        refused = await client.post(
            "/text-to-speech",
            headers=tenant.headers,
            json={"voice_id": JOE, "text": SECOND, "previous_request_ids": ids},
        )
        assert ids[0] in assert_error(refused, 400, "INVALID_REQUEST")["message"]
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", len(FIRST))]
    # The organization's next request deletes what is past keeping.
    _, latest = await said(client, tenant, text=SECOND)
    assert await kept(tenants, tenant.org_id) == [latest]


async def test_an_operator_may_keep_no_text(
    tmp_path: Path, database_url: str, engines: Engines
) -> None:
    settings = make_settings(tmp_path, database_url, stitching_minutes=0)
    tenants = Tenants(settings)
    async with running(create_app(settings, engines)) as client:
        tenant = await tenants.create()
        _, request_id = await said(client, tenant, text=FIRST)
        refused = await client.post(
            "/text-to-speech",
            headers=tenant.headers,
            json={"voice_id": JOE, "text": SECOND, "next_request_ids": [request_id]},
        )
    assert "previous_text" in assert_error(refused, 400, "INVALID_REQUEST")["message"]
    assert await kept(tenants, tenant.org_id) == []
