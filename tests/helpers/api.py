"""Requests to the native API and what the tests check in every answer."""

from __future__ import annotations

import io
import re
from pathlib import Path

import av
import httpx
from sqlalchemy import select

from tests.helpers import speech_clips as clips
from tests.helpers.app import Tenant, Tenants
from tests.helpers.voices import JOE
from voice_service.core.models import UsageRecord, Voice
from voice_service.engines.protocols import Pcm
from voice_service.inference.engines import Engines

REQUEST_ID = re.compile(r"^req_[0-9a-f]{24}$")
# What the native API's 415 lists as accepted.
ACCEPTED = "mp3, wav, m4a, webm, ogg"


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, str]:
    """The spec's envelope with `status` and `code`, and the response's own request id."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "request_id"}
    assert error["code"] == code
    assert error["message"]
    assert REQUEST_ID.match(error["request_id"])
    assert error["request_id"] == response.headers["x-request-id"]
    return error


async def usage_units(tenants: Tenants, org_id: str) -> list[tuple[str, int]]:
    records = await tenants.run(
        lambda s: s.scalars(select(UsageRecord).where(UsageRecord.org_id == org_id))
    )
    return [(r.endpoint, r.units) for r in records]


async def speak(
    client: httpx.AsyncClient, tenant: Tenant, text: str, voice_id: str = JOE, **fields: object
) -> httpx.Response:
    """POST /text-to-speech of `text` in `voice_id`, with the body's other `fields`."""
    body = {"text": text, "voice_id": voice_id, **fields}
    return await client.post("/text-to-speech", headers=tenant.headers, json=body)


def mp3_facts(data: bytes) -> tuple[int, float, int]:
    """(channels, seconds of decoded audio, bit rate) of an MP3 file."""
    with av.open(io.BytesIO(data), format="mp3") as container:
        stream = container.streams.audio[0]
        channels, rate = stream.codec_context.channels, stream.codec_context.sample_rate
        bit_rate = stream.codec_context.bit_rate or container.bit_rate
        samples = sum(frame.samples for frame in container.decode(stream))
    return channels, samples / rate, bit_rate


async def transcribe(
    client: httpx.AsyncClient,
    tenant: Tenant,
    data: bytes,
    *,
    language: str | None = None,
    endpoint: str = "/speech-to-text",
    filename: str = "audio",
    content_type: str = "application/octet-stream",
) -> httpx.Response:
    form = {"language": language} if language is not None else {}
    return await client.post(
        endpoint,
        headers=tenant.headers,
        files={"file": (filename, data, content_type)},
        data=form,
    )


def raised_voice_sample(tmp_path: Path) -> bytes:
    """Joe played 1.6x faster: a shorter vocal tract and a higher voice, as a WAV file."""
    joe = clips.english_speech(" ".join(clips.ENGLISH_TEXTS[:2]))
    faster = Pcm(samples=joe.samples, sample_rate=int(joe.sample_rate * 1.6))
    return clips.write_audio(tmp_path / "sample.wav", faster, "wav-s16").read_bytes()


async def clone_on_base(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    engines: Engines,
    base: str,
    folder: Path,
) -> Voice:
    """A clone (its stored row) whose base is the Kokoro clone base `base`: made from that
    base's own English, so it is the nearest whatever the others are."""
    spoken = engines.speakers["kokoro"].synthesize(base, " ".join(clips.ENGLISH_TEXTS[1:3]))
    sample = clips.write_audio(folder / "sample.wav", spoken, "wav-s16").read_bytes()
    response = await clone(client, tenant, sample)
    assert response.status_code == 201, response.text
    voice_id = response.json()["voice"]["id"]
    row = await tenants.run(lambda s: s.get(Voice, voice_id))
    assert row is not None and row.profile is not None
    assert row.profile["base_voice"] == base
    return row


async def clone(
    client: httpx.AsyncClient,
    tenant: Tenant,
    sample: bytes,
    **fields: str,
) -> httpx.Response:
    form = {"name": "My voice", "consent": "true", **fields}
    form = {k: v for k, v in form.items() if v is not None}
    return await client.post(
        "/voices/clone",
        headers=tenant.headers,
        data=form,
        files={"file": ("sample.bin", sample, "application/octet-stream")},
    )
