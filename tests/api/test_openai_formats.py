"""OpenAI's file formats on OpenAI's API, checked by content; the native API keeps its five.

Each of OpenAI's names is sent as a real file PyAV wrote, and the name on the upload is the
only thing that says which one it is meant to be: mp3, mpga and mpeg are MPEG audio; m4a and
mp4 are MPEG-4 files (the mp4 with a video track, its index at the end); ogg and oga are Ogg
(Opus; FLAC); flac a FLAC stream.
"""

from __future__ import annotations

from pathlib import Path

import av
import httpx
import pytest

from tests.helpers import speech_clips as clips
from tests.helpers.api import ACCEPTED, assert_error, transcribe, usage_units
from tests.helpers.app import Tenant, Tenants

pytestmark = pytest.mark.anyio

TEXT = "The quick brown fox jumps over the lazy dog."
OPENAI = "http://testserver/v1/audio"

# OpenAI's name -> (our variant, muxer options): what a file of that name holds.
CONTENT: dict[str, tuple[str, dict[str, str]]] = {
    "flac": ("flac", {}),
    "m4a": ("m4a", {"movflags": "+faststart"}),  # the index first, as phones write it
    "mp3": ("mp3", {}),
    "mp4": ("mp4-video", {}),  # a video track beside the audio; the index last
    "mpeg": ("mp3-no-id3", {}),
    "mpga": ("mp3", {}),
    "oga": ("ogg-flac", {}),
    "ogg": ("ogg-opus", {}),
    "wav": ("wav-s16", {}),
    "webm": ("webm-opus", {}),
}


def speech_file(tmp_path: Path, variant: str, options: dict[str, str] | None = None) -> bytes:
    path = tmp_path / f"{variant}.bin"
    return clips.write_audio(path, clips.english_speech(TEXT), variant, options).read_bytes()


async def openai_upload(
    client: httpx.AsyncClient,
    tenant: Tenant,
    data: bytes,
    *,
    name: str = "audio",
    task: str = "transcriptions",
    **fields: str,
) -> httpx.Response:
    return await client.post(
        f"{OPENAI}/{task}",
        headers=tenant.headers,
        files={"file": (name, data, "application/octet-stream")},
        data={"model": "whisper-1", **fields},
    )


def assert_invalid_file_format(response: httpx.Response) -> str:
    """OpenAI's answer to a file it does not take: 400, its error shape, its wording."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "file"
    names = "['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'wav', 'webm']"
    assert error["message"].startswith(f"Invalid file format. Supported formats: {names}")
    message: str = error["message"]
    return message


def test_every_openai_name_is_covered() -> None:
    assert set(CONTENT) == {
        "flac",
        "m4a",
        "mp3",
        "mp4",
        "mpeg",
        "mpga",
        "oga",
        "ogg",
        "wav",
        "webm",
    }


@pytest.mark.parametrize("name", sorted(CONTENT))
async def test_each_openai_format_is_transcribed(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path, name: str
) -> None:
    variant, options = CONTENT[name]
    data = speech_file(tmp_path, variant, options)
    response = await openai_upload(
        client, tenant, data, name=f"speech.{name}", language="en", response_format="verbose_json"
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert "fox" in body["text"].lower(), body["text"]
    assert body["duration"] == pytest.approx(clips.english_speech(TEXT).duration_seconds, abs=0.1)


@pytest.mark.parametrize("task", ["transcriptions", "translations"])
@pytest.mark.parametrize("stream", ["false", "true"])
async def test_other_content_is_openais_400_and_not_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, task: str, stream: str
) -> None:
    junk = b"not audio at all, whatever the name says\n" * 40
    fields = {"stream": stream} if task == "transcriptions" else {}
    response = await openai_upload(client, tenant, junk, name="clip.mp3", task=task, **fields)
    assert "not a recognised audio container" in assert_invalid_file_format(response)
    assert await usage_units(tenants, tenant.org_id) == []


async def test_a_codec_openai_does_not_list_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    # A-law, a telephone codec, in a WAV: the container is one OpenAI lists, its codec not.
    path = tmp_path / "alaw"
    with av.open(str(path), "w", format="wav") as container:
        stream = container.add_stream("pcm_alaw", rate=8000, layout="mono")
        frame = av.AudioFrame.from_ndarray(
            clips.tone(0.5, rate=8000).samples.reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = 8000
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    response = await openai_upload(client, tenant, path.read_bytes())
    assert "codec pcm_alaw" in assert_invalid_file_format(response)


@pytest.mark.parametrize("variant", sorted(clips.OPENAI_FORMATS))
async def test_the_native_api_refuses_what_only_openai_takes(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path, variant: str
) -> None:
    data = clips.write_audio(tmp_path / variant, clips.tone(0.5), variant).read_bytes()
    for endpoint in ("/speech-to-text", "/asr"):
        response = await transcribe(client, tenant, data, endpoint=endpoint)
        error = assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")
        assert error["message"].endswith(f"Accepted formats: {ACCEPTED}."), error["message"]
