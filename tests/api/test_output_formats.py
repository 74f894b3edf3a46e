"""`output_format` on the native text to speech: ElevenLabs' names, each decoded by PyAV
with the codec and rate it names; raw formats timed against the MP3 of the same text."""

from __future__ import annotations

import io

import av
import httpx
import pytest

from tests.helpers.api import assert_error, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.voices import JOE, SPANISH
from voice_service.audio.output_formats import NAMED_FORMATS

pytestmark = pytest.mark.anyio

TEXT = "Please hold while I connect your call."

# name -> (demuxer, codec, rate, content type, bit rate or None)
EXPECTED: dict[str, tuple[str, str, int, str, int | None]] = {
    "mp3_22050_32": ("mp3", "mp3float", 22_050, "audio/mpeg", 32_000),
    "mp3_44100_64": ("mp3", "mp3float", 44_100, "audio/mpeg", 64_000),
    "mp3_44100_128": ("mp3", "mp3float", 44_100, "audio/mpeg", 128_000),
    "pcm_8000": ("s16le", "pcm_s16le", 8_000, "audio/pcm;rate=8000", None),
    "pcm_16000": ("s16le", "pcm_s16le", 16_000, "audio/pcm;rate=16000", None),
    "pcm_22050": ("s16le", "pcm_s16le", 22_050, "audio/pcm;rate=22050", None),
    "pcm_24000": ("s16le", "pcm_s16le", 24_000, "audio/pcm;rate=24000", None),
    "pcm_44100": ("s16le", "pcm_s16le", 44_100, "audio/pcm;rate=44100", None),
    "ulaw_8000": ("mulaw", "pcm_mulaw", 8_000, "audio/basic", None),
    "alaw_8000": ("alaw", "pcm_alaw", 8_000, "audio/x-alaw-basic", None),
    "opus_48000_64": ("ogg", "opus", 48_000, "audio/ogg", None),
}
RAW = {"s16le", "mulaw", "alaw"}


def test_every_name_is_expected() -> None:
    assert set(EXPECTED) == set(NAMED_FORMATS)


def decoded(data: bytes, name: str) -> tuple[str, int, float, int | None]:
    """(codec, rate, seconds, bit rate) as PyAV reads `data` in the format `name` says."""
    demuxer, _, rate, _, _ = EXPECTED[name]
    # A raw stream carries no header: the rate and layout are the format's own.
    options = {"sample_rate": str(rate), "ch_layout": "mono"} if demuxer in RAW else {}
    with av.open(io.BytesIO(data), format=demuxer, options=options) as container:
        stream = container.streams.audio[0]
        context = stream.codec_context
        frames = list(container.decode(stream))
        samples = sum(frame.samples for frame in frames)
        codec, decoded_rate = context.name, frames[0].sample_rate
        assert all(frame.layout.nb_channels == 1 for frame in frames)
        return codec, decoded_rate, samples / decoded_rate, context.bit_rate or None


async def speak_as(
    client: httpx.AsyncClient,
    tenant: Tenant,
    name: str,
    *,
    path: str = "/text-to-speech",
    voice_id: str = JOE,
) -> httpx.Response:
    return await client.post(
        path,
        params={"output_format": name},
        headers=tenant.headers,
        json={"text": TEXT, "voice_id": voice_id},
    )


# The length of TEXT in the default MP3, by voice and path (a stream cuts its first
# sentence in two): measured once.
_MP3_SECONDS: dict[tuple[str, str], float] = {}


async def mp3_seconds(
    client: httpx.AsyncClient, tenant: Tenant, voice_id: str, path: str = "/text-to-speech"
) -> float:
    if (voice_id, path) not in _MP3_SECONDS:
        response = await client.post(
            path, headers=tenant.headers, json={"text": TEXT, "voice_id": voice_id}
        )
        assert response.status_code == 200
        with av.open(io.BytesIO(response.content), format="mp3") as container:
            frames = list(container.decode(audio=0))
            seconds = sum(frame.samples for frame in frames) / frames[0].sample_rate
        _MP3_SECONDS[voice_id, path] = seconds
    return _MP3_SECONDS[voice_id, path]


@pytest.mark.parametrize("path", ["/text-to-speech", "/text-to-speech/stream"])
@pytest.mark.parametrize("name", list(EXPECTED))
async def test_each_format_decodes_with_its_codec_and_rate(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, name: str, path: str
) -> None:
    response = await speak_as(client, tenant, name, path=path)
    assert response.status_code == 200, response.text
    _, codec, rate, content_type, bit_rate = EXPECTED[name]
    assert response.headers["content-type"] == content_type
    got_codec, got_rate, seconds, got_bit_rate = decoded(response.content, name)
    assert (got_codec, got_rate) == (codec, rate)
    if bit_rate is not None:
        assert got_bit_rate == bit_rate
    # A raw format at the wrong rate would decode to the wrong length: compare with the
    # same text as the default MP3.
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", len(TEXT))]
    reference = await mp3_seconds(client, tenant, JOE, path)
    assert seconds == pytest.approx(reference, abs=0.15)


async def test_a_phone_format_from_a_kokoro_voice(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    response = await speak_as(client, tenant, "ulaw_8000", voice_id=SPANISH)
    assert response.status_code == 200
    codec, rate, seconds, _ = decoded(response.content, "ulaw_8000")
    assert (codec, rate) == ("pcm_mulaw", 8_000)
    assert len(response.content) == round(seconds * 8_000)  # one byte a sample
    assert seconds == pytest.approx(await mp3_seconds(client, tenant, SPANISH), abs=0.15)


@pytest.mark.parametrize("name", ["wav", "mp3", "pcm_48000", "ULAW_8000", ""])
@pytest.mark.parametrize("path", ["/text-to-speech", "/text-to-speech/stream"])
async def test_an_unknown_name_is_400_listing_the_names_and_not_billed(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, name: str, path: str
) -> None:
    response = await speak_as(client, tenant, name, path=path)
    message = assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert "output_format" in message
    assert all(known in message for known in NAMED_FORMATS)
    assert await usage_units(tenants, tenant.org_id) == []


async def test_an_idempotency_key_reused_with_another_format_is_another_request(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    headers = {**tenant.headers, "Idempotency-Key": "format-change"}
    body = {"text": TEXT, "voice_id": JOE}
    first = await client.post(
        "/text-to-speech", params={"output_format": "pcm_16000"}, headers=headers, json=body
    )
    again = await client.post(
        "/text-to-speech", params={"output_format": "pcm_16000"}, headers=headers, json=body
    )
    other = await client.post(
        "/text-to-speech", params={"output_format": "ulaw_8000"}, headers=headers, json=body
    )
    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert "Idempotency-Key" in assert_error(other, 400, "INVALID_REQUEST")["message"]
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", len(TEXT))]
