"""ElevenLabs' `voice_settings.speed` on the native speech routes: the engine's own timing,
streamed and timed alike, billed as at the voice's own pace."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from tests.helpers.api import assert_error, mp3_facts, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.inference import spoken
from tests.helpers.voices import JOE, JOE_KEY
from voice_service.audio.encode import AudioEncoder
from voice_service.audio.output_formats import NAMED_FORMATS
from voice_service.engines.manner import Manner
from voice_service.inference.engines import Engines

pytestmark = pytest.mark.anyio

TEXT = "The keeper climbed the stairs. He lit the lamp at dusk."


def body(speed: object) -> dict[str, Any]:
    return {"text": TEXT, "voice_id": JOE, "voice_settings": {"speed": speed, "stability": 0.5}}


async def test_the_speech_is_the_engines_own_at_that_speed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, engines: Engines
) -> None:
    response = await client.post(
        "/text-to-speech",
        params={"output_format": "pcm_22050"},
        headers=tenant.headers,
        json=body(1.5),
    )
    assert response.status_code == 200, response.text

    # Byte for byte what Piper says with its phonemes' lengths scaled: no time-stretch after.
    encoder = AudioEncoder(NAMED_FORMATS["pcm_22050"], streaming=False)
    for chunk in spoken(engines, JOE_KEY, None, TEXT, Manner(speed=1.5)):
        encoder.add(chunk.pcm)
    assert response.content == encoder.finish()
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", len(TEXT))]


async def test_a_stream_at_half_speed_lasts_about_twice_as_long(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    seconds = {}
    for speed in (1.0, 0.5):
        response = await client.post(
            "/text-to-speech/stream", headers=tenant.headers, json=body(speed)
        )
        assert response.status_code == 200, response.text
        seconds[speed] = mp3_facts(response.content)[1]
    assert seconds[0.5] / seconds[1.0] == pytest.approx(2.0, rel=0.1)


async def test_timed_speech_times_the_faster_audio(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    ends = {}
    for speed in (1.0, 2.0):
        response = await client.post(
            "/text-to-speech/with-timestamps/stream",
            params={"output_format": "pcm_24000"},
            headers=tenant.headers,
            json=body(speed),
        )
        assert response.status_code == 200, response.text
        lines = [json.loads(line) for line in response.text.splitlines()]
        audio = b"".join(base64.b64decode(line["audio_base64"]) for line in lines)
        last = [line["alignment"]["character_end_times_seconds"] for line in lines]
        ends[speed] = max(end for line_ends in last for end in line_ends)
        assert ends[speed] <= len(audio) / 2 / 24_000 + 0.01
    assert ends[2.0] / ends[1.0] == pytest.approx(0.5, rel=0.1)


@pytest.mark.parametrize("speed", [0.1, 4.5, "fast"])
@pytest.mark.parametrize(
    "path", ["/text-to-speech", "/text-to-speech/stream", "/text-to-speech/with-timestamps"]
)
async def test_a_speed_out_of_range_is_400_and_not_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, path: str, speed: object
) -> None:
    response = await client.post(path, headers=tenant.headers, json=body(speed))
    assert "speed" in assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert await usage_units(tenants, tenant.org_id) == []
