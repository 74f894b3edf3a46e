"""GET /usage?group_by=key|voice: the same billed units, broken down by who spent them and
which voice made them."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from tests.helpers.api import assert_error, speak, transcribe
from tests.helpers.app import Tenant, Tenants
from tests.helpers.voices import GERMAN, JOE
from tests.helpers.wav import silent_wav
from voice_service.core.models import ApiKey, Voice

pytestmark = pytest.mark.anyio


async def prefix_of(tenants: Tenants, key: Tenant) -> str:
    row = await tenants.run(lambda s: s.get(ApiKey, key.key_id))
    assert row is not None
    return row.prefix


async def name_of(tenants: Tenants, voice_id: str) -> str:
    row = await tenants.run(lambda s: s.get(Voice, voice_id))
    assert row is not None
    return row.name


async def test_usage_by_key_and_by_voice(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    scripts = await tenants.add_key(tenant, name="batch scripts")
    for key, text, voice in (
        (tenant, "Hello.", JOE),
        (tenant, "Hi", JOE),
        (scripts, "Hallo.", GERMAN),
    ):
        assert (await speak(client, key, text, voice)).status_code == 200
    heard = await transcribe(client, scripts, silent_wav(16000, 16000), language="en")
    assert heard.status_code == 200, heard.text
    stranger = await tenants.create()
    assert (await speak(client, stranger, "Not yours.", JOE)).status_code == 200
    today = datetime.now(UTC).date().isoformat()

    by_key = (await client.get("/usage?group_by=key", headers=tenant.headers)).json()
    assert by_key["usage"] == sorted(
        [
            {
                "date": today,
                "key": {
                    "id": tenant.key_id,
                    "prefix": await prefix_of(tenants, tenant),
                    "name": None,
                },
                "units": 8,
                "requests": 2,
            },
            {
                "date": today,
                "key": {
                    "id": scripts.key_id,
                    "prefix": await prefix_of(tenants, scripts),
                    "name": "batch scripts",
                },
                "units": 7,
                "requests": 2,
            },
        ],
        key=lambda row: row["key"]["id"],
    )
    assert by_key["totals"] == {tenant.key_id: 8, scripts.key_id: 7}

    by_voice = (await client.get("/usage?group_by=voice", headers=tenant.headers)).json()
    assert by_voice["usage"] == sorted(
        [
            {
                "date": today,
                "voice": {"id": JOE, "name": await name_of(tenants, JOE)},
                "units": 8,
                "requests": 2,
            },
            {
                "date": today,
                "voice": {"id": GERMAN, "name": await name_of(tenants, GERMAN)},
                "units": 6,
                "requests": 1,
            },
        ],
        key=lambda row: row["voice"]["id"],
    )
    assert by_voice["totals"] == {JOE: 8, GERMAN: 6}  # the transcription made no voice's units

    by_endpoint = (await client.get("/usage", headers=tenant.headers)).json()
    assert by_endpoint["totals"] == {"speech-to-text": 1, "text-to-speech": 14}
    assert (
        by_endpoint == (await client.get("/usage?group_by=endpoint", headers=tenant.headers)).json()
    )


async def test_an_unknown_grouping_is_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.get("/usage?group_by=day", headers=tenant.headers)
    assert "group_by" in assert_error(response, 400, "INVALID_REQUEST")["message"]
