"""ElevenLabs' `previous_text` and `next_text`: a sentence split across two requests is said
as one, each request billed for its own text only."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.api import assert_error, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.voices import JOE

pytestmark = pytest.mark.anyio

FIRST = "I went to the market"
SECOND = "and bought some fresh bread for dinner."
RATE = 22_050


async def pcm(client: httpx.AsyncClient, tenant: Tenant, **body: str) -> bytes:
    response = await client.post(
        "/text-to-speech",
        params={"output_format": "pcm_22050"},
        headers=tenant.headers,
        json={"voice_id": JOE, **body},
    )
    assert response.status_code == 200, response.text
    return response.content


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


@pytest.mark.parametrize("field", ["previous_request_ids", "next_request_ids"])
async def test_request_stitching_by_id_is_refused_by_name_and_not_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, field: str
) -> None:
    """No request's text is kept, so ElevenLabs' ids of earlier requests cannot be taken;
    an empty list, which asks for nothing, is."""
    refused = await client.post(
        "/text-to-speech",
        headers=tenant.headers,
        json={"voice_id": JOE, "text": FIRST, field: ["req_0123456789abcdef01234567"]},
    )
    message = assert_error(refused, 400, "INVALID_REQUEST")["message"]
    assert field in message and "previous_text" in message
    assert await usage_units(tenants, tenant.org_id) == []
    empty = await client.post(
        "/text-to-speech", headers=tenant.headers, json={"voice_id": JOE, "text": FIRST, field: []}
    )
    assert empty.status_code == 200, empty.text
