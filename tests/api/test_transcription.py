"""POST /speech-to-text and /asr over HTTP with real audio in every accepted format."""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path

import httpx
import pytest
from bench.wer import words as word_list
from fastapi import FastAPI

from tests.helpers import speech_clips as clips
from tests.helpers.api import ACCEPTED, assert_error, transcribe, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.inference import slots_held
from voice_service.books.requestlog.repository import recent_requests
from voice_service.tenancy import service as tenancy

pytestmark = pytest.mark.anyio


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-zäöüßñáéíóú]+", text.lower()))


def clip(tmp_path: Path, variant: str, text: str = clips.ENGLISH_TEXT) -> bytes:
    path = clips.write_audio(tmp_path / f"{variant}.bin", clips.english_speech(text), variant)
    return path.read_bytes()


@pytest.mark.parametrize("variant", sorted(clips.FORMATS))
async def test_every_accepted_format_is_transcribed(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path, variant: str
) -> None:
    response = await transcribe(client, tenant, clip(tmp_path, variant), language="en")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"text", "language", "request_id"}
    assert body["language"] == "en"
    assert body["request_id"] == response.headers["x-request-id"]
    expected = words(clips.ENGLISH_TEXT)
    # Whisper base writes the clip's "river bank" as one word, and hears "jumped" at 8 kHz.
    heard = words(body["text"].replace("riverbank", "river bank"))
    assert len(heard & expected) >= len(expected) - 2, body["text"]


README = Path(__file__).parents[2] / "README.md"


def readme_speech_request() -> dict[str, str]:
    """The body of the README's text-to-speech example (the one that writes hello.mp3)."""
    example = re.search(r"-d '(\{[^']*\})' \\\n\s*-o hello\.mp3", README.read_text())
    assert example is not None, "the README's hello.mp3 example has moved"
    body: dict[str, str] = json.loads(example[1])
    return body


@pytest.mark.parametrize("language", ["en", None])
async def test_the_readme_example_comes_back_word_for_word(
    client: httpx.AsyncClient, tenant: Tenant, language: str | None
) -> None:
    # As a user runs it: the README's request, its hello.mp3 sent back for a transcript.
    request = readme_speech_request()
    speech = await client.post("/text-to-speech", headers=tenant.headers, json=request)
    assert speech.status_code == 200, speech.text
    response = await transcribe(client, tenant, speech.content, language=language)
    assert response.status_code == 200, response.text
    assert response.json()["language"] == "en"
    assert word_list(response.json()["text"]) == word_list(request["text"]), response.json()


async def test_language_is_detected_when_omitted(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    german = clips.espeak_speech(clips.GERMAN_TEXT, "de")
    data = clips.write_audio(tmp_path / "de", german, "ogg-opus").read_bytes()
    response = await transcribe(client, tenant, data)
    assert response.status_code == 200, response.text
    assert response.json()["language"] == "de"
    assert {"guten", "morgen"} <= words(response.json()["text"])


async def test_english_is_detected_when_omitted(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    response = await transcribe(client, tenant, clip(tmp_path, "mp3"))
    assert response.json()["language"] == "en"
    assert {"quick", "brown", "fox"} <= words(response.json()["text"])


async def test_name_and_declared_type_do_not_matter(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    response = await transcribe(
        client,
        tenant,
        clip(tmp_path, "wav-s16"),
        language="en",
        filename="song.mp3",
        content_type="audio/mpeg",
    )
    assert response.status_code == 200
    assert "fox" in words(response.json()["text"])


@pytest.mark.parametrize(
    "data",
    [
        b"this is plainly a text file, whatever its name says\n" * 20,
        b"\x00" * 4096,
        b"OggS" + bytes(range(256)) * 40,
        b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\xff" * 5000,
        b"\x1aE\xdf\xa3" + b"\x00" * 3000,
        b"%PDF-1.7\n" + b"x" * 3000,
    ],
    ids=["text", "zeros", "ogg-garbage", "id3-garbage", "ebml-garbage", "pdf"],
)
async def test_non_audio_is_415_listing_formats_and_not_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, data: bytes
) -> None:
    response = await transcribe(
        client, tenant, data, filename="clip.mp3", content_type="audio/mpeg"
    )
    assert ACCEPTED in assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")["message"]
    assert await usage_units(tenants, tenant.org_id) == []


async def test_truncated_m4a_is_415(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    data = clip(tmp_path, "m4a")
    assert_error(
        await transcribe(client, tenant, data[: len(data) // 2]), 415, "UNSUPPORTED_MEDIA_TYPE"
    )


async def test_truncated_mp3_transcribes_what_is_there(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    data = clip(tmp_path, "mp3")
    response = await transcribe(client, tenant, data[: len(data) // 2], language="en")
    assert response.status_code == 200
    assert "quick" in words(response.json()["text"])


async def test_usage_is_ceil_of_decoded_seconds_per_endpoint(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, tmp_path: Path
) -> None:
    pcm = clips.english_speech()
    data = clips.write_audio(tmp_path / "a.wav", pcm, "wav-s16").read_bytes()
    seconds = math.ceil(pcm.duration_seconds)
    assert (await transcribe(client, tenant, data, language="en")).status_code == 200
    assert (
        await transcribe(client, tenant, data, language="en", endpoint="/asr")
    ).status_code == 200
    assert sorted(await usage_units(tenants, tenant.org_id)) == [
        ("asr", seconds),
        ("speech-to-text", seconds),
    ]


async def test_a_fraction_of_a_second_bills_one_unit(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, tmp_path: Path
) -> None:
    data = clips.write_audio(tmp_path / "t.wav", clips.tone(0.3), "wav-s16").read_bytes()
    response = await transcribe(client, tenant, data, language="en", endpoint="/asr")
    assert response.status_code == 200
    assert await usage_units(tenants, tenant.org_id) == [("asr", 1)]


@pytest.mark.parametrize("language", ["english", "xx", "e", "en-US", "123", "zz"])
async def test_unknown_language_is_400_naming_the_field(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, tmp_path: Path, language: str
) -> None:
    response = await transcribe(client, tenant, clip(tmp_path, "wav-s16"), language=language)
    assert assert_error(response, 400, "INVALID_REQUEST")["message"].startswith("language")
    assert await usage_units(tenants, tenant.org_id) == []


async def test_language_hint_is_case_insensitive(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    response = await transcribe(client, tenant, clip(tmp_path, "wav-s16"), language="EN")
    assert response.json()["language"] == "en"


async def test_missing_file_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        data={"language": "en"},
        files={"other": ("x", b"abc")},
    )
    assert assert_error(response, 400, "INVALID_REQUEST")["message"].startswith("file")


async def test_file_sent_as_a_text_field_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        data={"file": "not a file"},
        files={"x": ("x", b"abc")},
    )
    assert_error(response, 400, "INVALID_REQUEST")


async def test_json_body_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post("/speech-to-text", headers=tenant.headers, json={"file": "x"})
    assert_error(response, 400, "INVALID_REQUEST")


async def test_multipart_without_boundary_is_400(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/speech-to-text",
        headers={**tenant.headers, "Content-Type": "multipart/form-data"},
        content=b"--x\r\nContent-Disposition: form-data; name=file\r\n\r\nabc\r\n--x--\r\n",
    )
    assert_error(response, 400, "INVALID_REQUEST")


async def test_thousands_of_parts_are_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    boundary = "b0undary"
    part = f'--{boundary}\r\nContent-Disposition: form-data; name="f"\r\n\r\nv\r\n'
    body = (part * 5000 + f"--{boundary}--\r\n").encode()
    response = await client.post(
        "/speech-to-text",
        headers={**tenant.headers, "Content-Type": f"multipart/form-data; boundary={boundary}"},
        content=body,
    )
    assert "Too many fields" in assert_error(response, 400, "INVALID_REQUEST")["message"]


async def test_huge_text_field_is_refused(client: httpx.AsyncClient, tenant: Tenant) -> None:
    response = await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        data={"language": "e" * (2 * 1024 * 1024)},
        files={"file": ("a", b"abc")},
    )
    assert_error(response, 400, "INVALID_REQUEST")


async def test_declared_oversized_upload_is_413(client: httpx.AsyncClient, tenant: Tenant) -> None:
    headers = {
        **tenant.headers,
        "Content-Type": "multipart/form-data; boundary=x",
        "Content-Length": str(26 * 1024 * 1024),
    }
    response = await client.post("/speech-to-text", headers=headers, content=b"--x--\r\n")
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")


async def test_streamed_oversized_upload_is_413(client: httpx.AsyncClient, tenant: Tenant) -> None:
    boundary = "b0undary"

    async def body():  # type: ignore[no-untyped-def]
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
            "Content-Type: audio/wav\r\n\r\n"
        ).encode()
        for _ in range(30):
            yield b"\x00" * (1024 * 1024)

    response = await client.post(
        "/speech-to-text",
        headers={**tenant.headers, "Content-Type": f"multipart/form-data; boundary={boundary}"},
        content=body(),
    )
    assert_error(response, 413, "PAYLOAD_TOO_LARGE")


async def test_file_of_exactly_the_cap_is_not_refused_for_size(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    data = b"\x00" * (25 * 1024 * 1024)
    response = await transcribe(client, tenant, data)
    assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")


async def test_audio_longer_than_the_maximum_is_400(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, tmp_path: Path
) -> None:
    bomb = clips.long_silent_ogg_opus(tmp_path / "long.ogg", 2 * 3600)
    assert bomb.stat().st_size < 5 * 1024 * 1024
    response = await transcribe(client, tenant, bomb.read_bytes(), language="en")
    assert "longer than" in assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert await usage_units(tenants, tenant.org_id) == []


@pytest.mark.parametrize(
    ("service", "endpoint"), [("speech-to-text", "/speech-to-text"), ("asr", "/asr")]
)
async def test_disabled_service_is_403_and_the_other_still_works(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    tmp_path: Path,
    service: str,
    endpoint: str,
) -> None:
    await tenants.run(
        lambda s: tenancy.set_service_enabled(s, "org", tenant.org_id, service, False)
    )
    data = clip(tmp_path, "wav-s16")
    assert_error(await transcribe(client, tenant, data, endpoint=endpoint), 403, "SERVICE_DISABLED")
    other = "/asr" if endpoint == "/speech-to-text" else "/speech-to-text"
    assert (
        await transcribe(client, tenant, data, language="en", endpoint=other)
    ).status_code == 200


async def test_requests_are_logged_with_their_outcome(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, tmp_path: Path
) -> None:
    ok = await transcribe(client, tenant, clip(tmp_path, "wav-s16"), language="en", endpoint="/asr")
    bad = await transcribe(client, tenant, b"junk" * 100, endpoint="/asr")
    rows = {
        r.entry.request_id: r.entry
        for r in await tenants.run(lambda s: recent_requests(s, tenant.org_id, 5))
    }
    assert (rows[ok.headers["x-request-id"]].status, rows[ok.headers["x-request-id"]].path) == (
        200,
        "/api/v1/asr",
    )
    assert rows[bad.headers["x-request-id"]].error_code == "UNSUPPORTED_MEDIA_TYPE"


async def test_voices_answer_while_every_worker_transcribes(
    app: FastAPI, client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    long_text = " ".join(clips.ENGLISH_TEXTS)
    data = clips.write_audio(
        tmp_path / "l.wav", clips.english_speech(long_text), "wav-s16"
    ).read_bytes()
    pool = app.state.context.pool
    jobs = [asyncio.create_task(transcribe(client, tenant, data)) for _ in range(3)]
    async with asyncio.timeout(120):
        while slots_held(pool) < 2:  # noqa: ASYNC110 (polls server state; the pool has no event)
            await asyncio.sleep(0.01)
    voices = await client.get("/voices", headers=tenant.headers)
    assert voices.status_code == 200
    # Server-side evidence that the listing was answered while both workers were busy.
    assert slots_held(pool) == 2
    assert [r.status_code for r in await asyncio.gather(*jobs)] == [200, 200, 200]
