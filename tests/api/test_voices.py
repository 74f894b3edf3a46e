"""GET /voices and GET /voices/{id}: the shared catalogue, stable ids, languages, one voice."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers import speech_clips as clips
from tests.helpers.api import assert_error, clone
from tests.helpers.app import Tenant, Tenants, running
from tests.helpers.voices import JOE, VOICE_FIELDS
from voice_service.app import create_app
from voice_service.core.ids import catalogue_voice_id
from voice_service.inference.engines import Engines
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
        # The spec's fields, and a clone's description, resemblance and languages (null here)
        assert set(voice) == VOICE_FIELDS
        assert voice["description"] is None and voice["resemblance"] is None
        assert voice["languages"] is None
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


# GET /voices/{id}: one voice the organization can see, by the same rule as the listing.


async def test_a_catalogue_voice_is_got_by_id_as_listed(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    listed = {v["id"]: v for v in await list_voices(client, tenant)}
    response = await client.get(f"/voices/{JOE}", headers=tenant.headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"voice": listed[JOE]}


async def test_a_clone_is_got_by_its_org_only_and_not_once_deleted(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, tmp_path: Path
) -> None:
    other = await tenants.create()
    # One sentence is sample enough: what is tested is who can see the clone.
    sample = clips.write_audio(tmp_path / "sample", clips.english_speech(), "wav-s16")
    voice_id = (await clone(client, tenant, sample.read_bytes())).json()["voice"]["id"]
    listed = {v["id"]: v for v in await list_voices(client, tenant)}

    mine = await client.get(f"/voices/{voice_id}", headers=tenant.headers)
    assert mine.status_code == 200, mine.text
    assert mine.json() == {"voice": listed[voice_id]}
    assert mine.json()["voice"]["type"] == "CLONED"

    def message(response: httpx.Response, voice_id: str) -> str:
        return assert_error(response, 404, "NOT_FOUND")["message"].replace(voice_id, "<id>")

    unknown = "voice_" + "0" * 24
    theirs = await client.get(f"/voices/{voice_id}", headers=other.headers)
    missing = await client.get(f"/voices/{unknown}", headers=other.headers)
    assert message(theirs, voice_id) == message(missing, unknown)

    deleted = await client.delete(f"/voices/{voice_id}", headers=tenant.headers)
    assert deleted.status_code == 200, deleted.text
    gone = await client.get(f"/voices/{voice_id}", headers=tenant.headers)
    assert message(gone, voice_id) == message(missing, unknown)


async def test_deleting_a_catalogue_voice_is_404_saying_why(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await client.delete(f"/voices/{JOE}", headers=tenant.headers)
    message = assert_error(response, 404, "NOT_FOUND")["message"]
    assert "catalogue voices are shared and cannot be deleted" in message
    assert (await client.get(f"/voices/{JOE}", headers=tenant.headers)).status_code == 200
