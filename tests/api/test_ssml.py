"""SSML on the speech routes: a text that starts with <speak> is said as its elements say,
billed and timed by its text without tags; what it cannot say is a 400 that names the
element, and costs nothing."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.api import assert_error, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.voices import JOE

pytestmark = pytest.mark.anyio

DOCUMENT = (
    "<speak>\n  <p>Call <say-as interpret-as='telephone'>555-0134</say-as>"
    "<break time='500ms'/> about <sub alias='World Wide Web'>WWW</sub>.</p>\n</speak>"
)
WRITTEN = " Call 555-0134 about WWW. "  # tags left out, each run of whitespace one space


async def test_the_text_without_its_tags_is_timed_and_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    answer = await client.post(
        "/text-to-speech/with-timestamps",
        headers=tenant.headers,
        json={"text": DOCUMENT, "voice_id": JOE},
    )
    assert answer.status_code == 200, answer.text
    alignment = answer.json()["alignment"]
    assert "".join(alignment["characters"]) == WRITTEN
    starts, ends = (
        alignment["character_start_times_seconds"],
        alignment["character_end_times_seconds"],
    )
    www = WRITTEN.index("WWW")
    number = WRITTEN.index("555")
    # "WWW" lasts as long as "World Wide Web"; the number is said digit by digit, then a
    # half-second break, before "about".
    assert ends[www + 2] - starts[www] > 0.6
    assert starts[WRITTEN.index("about")] - ends[number + 7] >= 0.5
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", len(WRITTEN))]


async def test_openais_route_says_ssml_too(client: httpx.AsyncClient, tenant: Tenant) -> None:
    answer = await client.post(
        "http://testserver/v1/audio/speech",
        headers=tenant.headers,
        json={"model": "tts-1", "voice": "alloy", "input": DOCUMENT, "response_format": "wav"},
    )
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("<speak><audio src='https://example.com/a.mp3'/>Hi</speak>", "<audio> is not supported"),
        ("<speak><prosody volume='loud'>Hi</prosody></speak>", "rate only, not volume"),
        ("<speak></speak>", "says nothing"),
        (
            '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY a "lol">'
            '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><speak>&b;</speak>',
            "refuses",
        ),
        ("<speak>" + "<s>" * 600 + "Hi" + "</s>" * 600 + "</speak>", "nested more than 32"),
    ],
)
async def test_what_it_cannot_say_is_a_400_that_costs_nothing(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, document: str, says: str
) -> None:
    for route in ("/text-to-speech", "/text-to-speech/stream", "/text-to-speech/with-timestamps"):
        answer = await client.post(
            route, headers=tenant.headers, json={"text": document, "voice_id": JOE}
        )
        assert_error(answer, 400, "INVALID_REQUEST")
        assert says in answer.json()["error"]["message"], answer.text
    assert await usage_units(tenants, tenant.org_id) == []
