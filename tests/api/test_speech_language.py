"""ElevenLabs' `language_code` on the native speech routes: a clone says the text in any
language its base voice speaks, a catalogue voice in its own only; any other language is a
400 naming those the voice speaks, before anything is held or billed."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.helpers.api import assert_error, clone_on_base, speak, usage_units
from tests.helpers.app import Tenant, Tenants, running
from tests.helpers.inference import restarted, spoken
from tests.helpers.voices import JOE
from voice_service.app import create_app
from voice_service.audio.encode import AudioEncoder
from voice_service.audio.output_formats import NAMED_FORMATS
from voice_service.core.models import Voice
from voice_service.engines.kokoro import clone_base_key
from voice_service.engines.manner import Manner
from voice_service.inference.engines import Engines
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

SPANISH = "El tren al aeropuerto sale del andén que está junto a la estación vieja."
KUMO = clone_base_key("jm_kumo")


@pytest.fixture
async def kumo_clone(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, engines: Engines, tmp_path: Path
) -> Voice:
    return await clone_on_base(client, tenants, tenant, engines, KUMO, tmp_path)


async def test_a_clone_says_the_text_in_the_language_asked(
    client: httpx.AsyncClient, tenant: Tenant, engines: Engines, kumo_clone: Voice
) -> None:
    body = {"text": SPANISH, "voice_id": kumo_clone.id, "language_code": "es"}
    response = await client.post(
        "/text-to-speech",
        params={"output_format": "pcm_24000"},
        headers=tenant.headers,
        json=body,
    )
    assert response.status_code == 200, response.text

    # Byte for byte the clone's base speaking Spanish, converted toward the sample.
    encoder = AudioEncoder(NAMED_FORMATS["pcm_24000"], streaming=False)
    in_spanish = Manner(language="es")
    for chunk in spoken(engines, KUMO, kumo_clone.profile, SPANISH, in_spanish):
        encoder.add(chunk.pcm)
    assert response.content == encoder.finish()
    in_english = b"".join(
        chunk.pcm.samples.tobytes() for chunk in spoken(engines, KUMO, kumo_clone.profile, SPANISH)
    )
    assert response.content != in_english

    for route in ("/text-to-speech/stream", "/text-to-speech/with-timestamps"):
        other = await client.post(route, headers=tenant.headers, json=body)
        assert other.status_code == 200, other.text


async def test_a_clone_lists_the_languages_it_speaks(
    client: httpx.AsyncClient, tenant: Tenant, kumo_clone: Voice
) -> None:
    spoken = ["en", "es", "fr", "it", "pt", "ja"]
    one = await client.get(f"/voices/{kumo_clone.id}", headers=tenant.headers)
    assert one.json()["voice"]["languages"] == spoken
    listed = (await client.get("/voices", headers=tenant.headers)).json()["voices"]
    assert {voice["id"]: voice["languages"] for voice in listed}[kumo_clone.id] == spoken
    assert {voice["languages"] for voice in listed if voice["type"] != "CLONED"} == {None}


async def test_a_language_the_clones_base_does_not_speak_is_refused_unbilled(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, kumo_clone: Voice
) -> None:
    before = await usage_units(tenants, tenant.org_id)
    for route in ("/text-to-speech", "/text-to-speech/stream"):
        body = {"text": "Guten Tag.", "voice_id": kumo_clone.id, "language_code": "de"}
        refused = await client.post(route, headers=tenant.headers, json=body)
        message = assert_error(refused, 400, "INVALID_REQUEST")["message"]
        assert "'de'" in message and "speaks en, es, fr, it, pt" in message
    assert await usage_units(tenants, tenant.org_id) == before


async def test_a_clone_whose_base_this_node_lacks_speaks_the_default_bases_language(
    settings: Settings, engines: Engines, tenant: Tenant, kumo_clone: Voice
) -> None:
    """An operator who turned Kokoro off: the clone speaks through Piper's Joe, in English."""
    without_kokoro = create_app(settings, restarted(engines, "piper", "espeak"))
    async with running(without_kokoro) as client:
        refused = await speak(client, tenant, SPANISH, kumo_clone.id, language_code="es")
        assert "speaks en." in assert_error(refused, 400, "INVALID_REQUEST")["message"]
        spoken_there = await speak(client, tenant, SPANISH, kumo_clone.id, language_code="en")
        assert spoken_there.status_code == 200, spoken_there.text


async def test_a_catalogue_voice_speaks_its_own_language_only(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    said = await speak(client, tenant, "Hello.", JOE, language_code="en")
    assert said.status_code == 200, said.text
    refused = await speak(client, tenant, SPANISH, JOE, language_code="es")
    assert "speaks en." in assert_error(refused, 400, "INVALID_REQUEST")["message"]


@pytest.mark.parametrize("code", ["spanish", "ES", "e", "", 7])
async def test_a_language_code_is_two_lowercase_letters(
    client: httpx.AsyncClient, tenant: Tenant, code: object
) -> None:
    response = await speak(client, tenant, "Hello.", JOE, language_code=code)
    assert "language_code" in assert_error(response, 400, "INVALID_REQUEST")["message"]
