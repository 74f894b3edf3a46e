"""POST /voices/clone and DELETE /voices/{id}: consented clones, isolated per organization."""

from __future__ import annotations

import asyncio
import hashlib
import io
import math
from pathlib import Path

import av
import httpx
import numpy as np
import pytest
import pyworld
from sqlalchemy import select

from tests.helpers import speech_clips as clips
from tests.helpers.api import (
    assert_error,
    clone,
    clone_on_base,
    raised_voice_sample,
    speak,
    usage_units,
)
from tests.helpers.app import Tenant, Tenants, running
from tests.helpers.inference import restarted
from tests.helpers.voices import JOE, VOICE_FIELDS
from voice_service.app import create_app
from voice_service.core.models import Voice, VoiceSample
from voice_service.engines.kokoro import SAMPLE_RATE as KOKORO_RATE
from voice_service.engines.kokoro import clone_base_key
from voice_service.engines.protocols import Pcm
from voice_service.inference.engines import Engines
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy

pytestmark = pytest.mark.anyio


@pytest.fixture
def sample(tmp_path: Path) -> bytes:
    return raised_voice_sample(tmp_path)


async def test_clone_is_created_billed_and_stores_consent(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, sample: bytes
) -> None:
    response = await clone(client, tenant, sample, description="Narration voice")
    assert response.status_code == 201, response.text
    voice = response.json()["voice"]
    assert set(voice) == VOICE_FIELDS
    assert (voice["name"], voice["type"], voice["language"]) == ("My voice", "CLONED", None)
    assert 0 <= voice["resemblance"] <= 1
    assert voice["languages"][0] == "en"  # its base voice's own first
    assert voice["description"] == "Narration voice"  # and as GET reads it back:
    again = await client.get(f"/voices/{voice['id']}", headers=tenant.headers)
    assert again.json()["voice"]["description"] == "Narration voice"
    assert voice["id"].startswith("voice_")
    assert await usage_units(tenants, tenant.org_id) == [("voices/clone", 1)]

    row = await tenants.run(lambda s: s.get(Voice, voice["id"]))
    assert row is not None
    assert row.consent == "true" and row.consented_at is not None
    assert row.consent_key_id == tenant.key_id
    assert row.sample_sha256 == hashlib.sha256(sample).hexdigest()
    assert row.description == "Narration voice"
    assert row.profile is not None and row.org_id == tenant.org_id


async def test_clone_speaks_closer_to_its_sample_than_the_base_voice(
    client: httpx.AsyncClient, tenant: Tenant, sample: bytes, tmp_path: Path
) -> None:
    voice_id = (await clone(client, tenant, sample)).json()["voice"]["id"]
    text = "Would you like a cup of tea, or would you rather have some cold water?"
    cloned = await speak(client, tenant, text, voice_id)
    base = await speak(client, tenant, text, JOE)
    assert cloned.status_code == 200 and cloned.headers["content-type"] == "audio/mpeg"
    target = median_pitch(decode_to_pcm(raised_voice_sample(tmp_path), fmt="wav"))
    cloned_pitch = median_pitch(decode_to_pcm(cloned.content))
    base_pitch = median_pitch(decode_to_pcm(base.content))
    # Pitch distance on a log scale, as it is heard: octaves, not hertz.
    assert abs(math.log(cloned_pitch / target)) < abs(math.log(base_pitch / target))


def median_pitch(pcm: Pcm) -> float:
    """Median F0 over every voiced frame, one estimator for sample and outputs alike."""
    signal = pcm.samples.astype(np.float64) / 32768.0
    f0, _ = pyworld.harvest(signal, pcm.sample_rate, f0_floor=60.0, f0_ceil=500.0)
    return float(np.median(f0[f0 > 0]))


def decode_to_pcm(data: bytes, fmt: str = "mp3") -> Pcm:
    with av.open(io.BytesIO(data), format=fmt) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=16000)
        frames = [f for frame in container.decode(audio=0) for f in resampler.resample(frame)]
    samples = np.concatenate([f.to_ndarray().reshape(-1) for f in frames]).astype(np.int16)
    return Pcm(samples=samples, sample_rate=16000)


async def test_clones_are_listed_and_usable_only_by_their_org(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, sample: bytes
) -> None:
    other = await tenants.create()
    voice_id = (await clone(client, tenant, sample)).json()["voice"]["id"]

    mine = (await client.get("/voices", headers=tenant.headers)).json()["voices"]
    theirs = (await client.get("/voices", headers=other.headers)).json()["voices"]
    assert voice_id in {v["id"] for v in mine}
    assert voice_id not in {v["id"] for v in theirs}
    assert next(v for v in mine if v["type"] == "CLONED")["id"] == voice_id

    unknown = "voice_" + "f" * 24
    used = await speak(client, other, "Hello.", voice_id)
    missing = await speak(client, other, "Hello.", unknown)
    assert_error(used, 404, "NOT_FOUND")
    assert (
        used.json()["error"]["message"].replace(voice_id, unknown)
        == (missing.json()["error"]["message"])
    )
    assert await usage_units(tenants, other.org_id) == []


@pytest.mark.parametrize(
    ("fields", "starts_with"),
    [
        ({"name": None}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"consent": None}, "consent"),
        ({"consent": "True"}, "consent"),
        ({"consent": "yes"}, "consent"),
        ({"consent": "false"}, "consent"),
        ({"consent": " true"}, "consent"),
        ({"description": "d" * 501}, "description"),
    ],
)
async def test_invalid_fields_are_400_and_not_billed(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    sample: bytes,
    fields: dict[str, str],
    starts_with: str,
) -> None:
    response = await clone(client, tenant, sample, **fields)
    assert assert_error(response, 400, "INVALID_REQUEST")["message"].startswith(starts_with)
    assert await usage_units(tenants, tenant.org_id) == []


async def test_limits_of_name_and_description_are_inclusive(
    client: httpx.AsyncClient, tenant: Tenant, sample: bytes
) -> None:
    response = await clone(client, tenant, sample, name="n" * 64, description="d" * 500)
    assert response.status_code == 201


async def test_missing_file_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/voices/clone",
        headers=tenant.headers,
        data={"name": "v", "consent": "true"},
        files={"other": ("x", b"x")},
    )
    assert_error(response, 400, "INVALID_REQUEST")


async def test_non_audio_sample_is_415(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await clone(client, tenant, b"not audio at all" * 100)
    assert (
        "mp3, wav, m4a, webm, ogg"
        in assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")["message"]
    )


async def test_oversized_sample_is_413(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await clone(client, tenant, b"\x00" * (25 * 1024 * 1024 + 1))
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")


CODEC2 = Path("/usr/share/codec2/wav")  # Debian's codec2-examples (.ci/run installs it)


def _pcm_wav(pcm: Pcm, path: Path) -> bytes:
    return clips.write_audio(path, pcm, "wav-s16").read_bytes()


@pytest.mark.parametrize(
    "kind", ["silence", "noise", "tone", "chord", "david4.wav", "vk2tpm_004.wav"]
)
async def test_sample_without_speech_is_400(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, tmp_path: Path, kind: str
) -> None:
    """Silence, noise, tones, and two recordings off the air that hold no voice (codec2's
    examples: a data modem's signal, and a digital voice mode's, undecoded)."""
    rng = np.random.default_rng(1)
    if kind.endswith(".wav"):
        data = (CODEC2 / kind).read_bytes()
    elif kind == "silence":
        data = _pcm_wav(clips.silence(3.0), tmp_path / "s.wav")
    elif kind == "noise":
        noise = Pcm(samples=(rng.normal(0, 6000, 48000)).astype(np.int16), sample_rate=16000)
        data = _pcm_wav(noise, tmp_path / "s.wav")
    else:
        hertz = (440.0,) if kind == "tone" else (262.0, 330.0, 392.0)
        seconds = np.arange(16000 * 5) / 16000
        signal = sum(np.sin(2 * np.pi * hz * seconds * (1 + 0.02 * seconds)) for hz in hertz)
        chord = Pcm((8000 * signal / len(hertz)).astype(np.int16), 16000)
        data = _pcm_wav(chord, tmp_path / "s.wav")
    response = await clone(client, tenant, data)
    message = assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert message.startswith("file: no usable speech in the sample")
    assert await usage_units(tenants, tenant.org_id) == []


async def test_a_clear_radio_recording_at_8_khz_is_cloned(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """A radio amateur's voice off the air (codec2's ve9qrp.wav, 8 kHz, 112 s): speech
    however it was recorded, which Whisper writes down without a mistake."""
    sample = (CODEC2 / "ve9qrp.wav").read_bytes()
    response = await clone(client, tenant, sample)
    assert response.status_code == 201, response.text
    assert 0 <= response.json()["voice"]["resemblance"] <= 1
    spoken = await speak(client, tenant, "Hello.", response.json()["voice"]["id"])
    assert spoken.status_code == 200


@pytest.mark.parametrize("kind", ["org", "account"])
async def test_cloning_disabled_is_403(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    sample: bytes,
    kind: tenancy.TenantKind,
) -> None:
    tenant_id = tenant.org_id if kind == "org" else tenant.account_id
    await tenants.run(lambda s: tenancy.set_service_enabled(s, kind, tenant_id, "cloning", False))
    assert_error(await clone(client, tenant, sample), 403, "SERVICE_DISABLED")


async def test_clone_limit_is_400_and_frees_up_on_delete(
    client: httpx.AsyncClient, tenants: Tenants, sample: bytes
) -> None:
    tenant = await tenants.create(clone_limit=1)
    first = await clone(client, tenant, sample)
    assert first.status_code == 201
    assert (
        "limit"
        in assert_error(await clone(client, tenant, sample), 400, "INVALID_REQUEST")["message"]
    )
    voice_id = first.json()["voice"]["id"]
    assert (await client.delete(f"/voices/{voice_id}", headers=tenant.headers)).status_code == 200
    assert (await clone(client, tenant, sample)).status_code == 201


async def test_the_default_clone_limit_applies(
    settings: Settings, engines: Engines, tenant: Tenant, sample: bytes
) -> None:
    # The operator's default (10 unless set), set low so that reaching it takes few clones.
    limited = settings.model_copy(update={"default_clone_limit": 2})
    async with running(create_app(limited, engines)) as client:
        statuses = [(await clone(client, tenant, sample)).status_code for _ in range(3)]
    assert statuses == [201, 201, 400]


async def test_clone_limit_holds_under_concurrency(
    client: httpx.AsyncClient, tenants: Tenants, sample: bytes
) -> None:
    tenant = await tenants.create(clone_limit=2)
    responses = await asyncio.gather(*(clone(client, tenant, sample) for _ in range(5)))
    assert sorted(r.status_code for r in responses) == [201, 201, 400, 400, 400]
    assert await usage_units(tenants, tenant.org_id) == [("voices/clone", 1)] * 2


async def test_delete_removes_sample_and_profile(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, sample: bytes
) -> None:
    voice_id = (await clone(client, tenant, sample)).json()["voice"]["id"]
    assert await tenants.run(lambda s: s.get(VoiceSample, voice_id)) is not None

    response = await client.delete(f"/voices/{voice_id}", headers=tenant.headers)
    assert response.status_code == 200
    assert response.json() == {"deleted": True, "id": voice_id}
    row = await tenants.run(lambda s: s.get(Voice, voice_id))
    assert row is not None and row.profile is None and row.deleted_at is not None
    assert await tenants.run(lambda s: s.get(VoiceSample, voice_id)) is None
    listed = (await client.get("/voices", headers=tenant.headers)).json()["voices"]
    assert voice_id not in {v["id"] for v in listed}
    assert_error(await speak(client, tenant, "Hello.", voice_id), 404, "NOT_FOUND")


async def test_delete_refusals_are_identical_404s(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, sample: bytes
) -> None:
    other = await tenants.create()
    theirs = (await clone(client, other, sample)).json()["voice"]["id"]
    deleted = (await clone(client, tenant, sample)).json()["voice"]["id"]
    await client.delete(f"/voices/{deleted}", headers=tenant.headers)

    def body(response: httpx.Response, voice_id: str) -> str:
        assert_error(response, 404, "NOT_FOUND")
        return str(response.json()["error"]["message"]).replace(voice_id, "<id>")

    bodies = {
        body(await client.delete(f"/voices/{voice_id}", headers=tenant.headers), voice_id)
        for voice_id in (theirs, deleted, "voice_" + "0" * 24)
    }
    assert len(bodies) == 1  # a catalogue voice's 404 says why (test_voices)
    # The other organization's clone is untouched.
    assert theirs in {
        v["id"] for v in (await client.get("/voices", headers=other.headers)).json()["voices"]
    }


async def test_concurrent_deletes_one_wins(
    client: httpx.AsyncClient, tenant: Tenant, sample: bytes
) -> None:
    voice_id = (await clone(client, tenant, sample)).json()["voice"]["id"]
    responses = await asyncio.gather(
        *(client.delete(f"/voices/{voice_id}", headers=tenant.headers) for _ in range(2))
    )
    assert sorted(r.status_code for r in responses) == [200, 404]


async def test_voice_rows_of_a_clone_stay_scoped(
    tenants: Tenants, client: httpx.AsyncClient, tenant: Tenant, sample: bytes
) -> None:
    await clone(client, tenant, sample)
    rows = await tenants.run(
        lambda s: s.scalars(
            select(Voice).where(Voice.type == "CLONED", Voice.org_id == tenant.org_id)
        )
    )
    assert len(list(rows)) == 1


def mp3_rate(data: bytes) -> int:
    with av.open(io.BytesIO(data), format="mp3") as container:
        return int(container.streams.audio[0].codec_context.sample_rate)


async def test_the_chosen_base_is_stored_and_speaks_after_a_restart(
    settings: Settings, engines: Engines, tenants: Tenants, tenant: Tenant, tmp_path: Path
) -> None:
    async with running(create_app(settings, engines)) as client:
        made = await clone_on_base(
            client, tenants, tenant, engines, clone_base_key("jf_nezumi"), tmp_path
        )
    voice_id = made.id

    # Kokoro speaks at 24 kHz, Piper at 22.05 kHz, and MP3 keeps the voice's rate.
    async with running(create_app(settings, restarted(engines, "piper", "kokoro"))) as client:
        after_restart = await speak(client, tenant, "Hello there.", voice_id)
    async with running(create_app(settings, restarted(engines, "piper", "espeak"))) as client:
        without_kokoro = await speak(client, tenant, "Hello there.", voice_id)
    assert mp3_rate(after_restart.content) == KOKORO_RATE
    # The operator turned Kokoro off: the clone still speaks, from Piper's joe.
    assert without_kokoro.status_code == 200
    assert mp3_rate(without_kokoro.content) == 22050
