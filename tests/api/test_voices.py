"""GET /voices: the shared catalogue, stable ids, languages."""

from __future__ import annotations

import re
from datetime import datetime

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers.app import Tenant, running
from tests.helpers.voices import JOE
from voice_service.app import create_app
from voice_service.engines.registry import Engines
from voice_service.ids import catalogue_voice_id
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

VOICE_ID = re.compile(r"^voice_[0-9a-f]{24}$")


async def list_voices(client: httpx.AsyncClient, tenant: Tenant) -> list[dict[str, object]]:
    response = await client.get("/voices", headers=tenant.headers)
    assert response.status_code == 200
    voices: list[dict[str, object]] = response.json()["voices"]
    return voices


async def test_catalogue_voices_have_the_spec_fields(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    voices = await list_voices(client, tenant)
    assert voices
    for voice in voices:
        assert set(voice) == {"id", "name", "language", "type", "created_at"}
        assert VOICE_ID.match(str(voice["id"]))
        assert voice["type"] == "PROVIDER"
        assert voice["language"]
        assert re.search(r"T\d\d:\d\d:\d\d\.\d+", str(voice["created_at"]))
        datetime.fromisoformat(str(voice["created_at"]))


async def test_catalogue_has_the_piper_voice_and_many_languages(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    voices = await list_voices(client, tenant)
    assert JOE in {v["id"] for v in voices}
    base_languages = {str(v["language"]).split("-")[0] for v in voices}
    assert len(base_languages) >= 20


async def test_catalogue_ids_are_stable_across_restarts(
    settings: Settings, engines: Engines, tenant: Tenant
) -> None:
    async def ids_and_times(app: FastAPI) -> dict[object, object]:
        async with running(app) as client:
            return {v["id"]: v["created_at"] for v in await list_voices(client, tenant)}

    first = await ids_and_times(create_app(settings, engines))
    again = await ids_and_times(create_app(settings, engines))
    assert first == again
    assert set(first) == {catalogue_voice_id(v.key) for v in engines.catalogue()}


async def test_each_language_lists_its_best_voice_first(
    client: httpx.AsyncClient, tenant: Tenant, engines: Engines
) -> None:
    voices = await list_voices(client, tenant)
    first: dict[str, str] = {}
    for voice in voices:
        first.setdefault(str(voice["language"]).split("-")[0], str(voice["name"]))
    assert voices[0]["id"] == JOE
    for language in ("es", "fr", "it", "pt"):
        assert first[language].startswith("Kokoro "), first[language]
    assert first["de"] == "eSpeak German (basic)"
    assert all("basic" in str(v["name"]) for v in voices if str(v["name"]).startswith("eSpeak"))
