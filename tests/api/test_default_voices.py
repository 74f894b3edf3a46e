"""Each language's default voice (the first `GET /voices` lists for it), as the README names
them: the English one says the README's example right every time, OpenAI's voice names speak
with it, and the Spanish, French, Italian and Portuguese ones are understood on held-out text."""

from __future__ import annotations

import hashlib

import httpx
import pytest
from bench.heldout_sentences import HELDOUT_SENTENCES
from bench.wer import word_error_rate, words

from tests.helpers.api import speak, transcribe
from tests.helpers.app import Tenant

pytestmark = pytest.mark.anyio

README_EXAMPLE = "Welcome to Voice Service."


async def voices_by_language(client: httpx.AsyncClient, tenant: Tenant) -> dict[str, list[str]]:
    """Voice names per primary language subtag, in the listing's order."""
    response = await client.get("/voices", headers=tenant.headers)
    assert response.status_code == 200, response.text
    named: dict[str, list[str]] = {}
    for voice in response.json()["voices"]:
        named.setdefault(str(voice["language"]).split("-")[0], []).append(str(voice["name"]))
    return named


async def voice_ids(client: httpx.AsyncClient, tenant: Tenant, language: str) -> list[str]:
    response = await client.get("/voices", headers=tenant.headers)
    return [
        str(voice["id"])
        for voice in response.json()["voices"]
        if str(voice["language"]).split("-")[0] == language
    ]


async def test_the_catalogue_lists_the_voices_the_readme_names_first(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    named = await voices_by_language(client, tenant)
    assert named["en"][:3] == [
        "Piper Joe (English, United States)",
        "Kokoro Gongitsune (English, United States)",
        "Kokoro Kumo (English, United States)",
    ]
    assert named["es"][:2] == ["Kokoro Gongitsune (Spanish)", "Kokoro Kumo (Spanish)"]
    assert named["fr"][0] == "Kokoro Kumo (French)"
    assert named["it"][0] == "Kokoro Kumo (Italian)"
    assert named["pt"][0] == "Kokoro Kumo (Portuguese, Brazil)"


async def test_the_default_english_voice_says_the_readme_example_right_every_time(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    voice_id = (await voice_ids(client, tenant, "en"))[0]
    renditions: dict[str, bytes] = {}
    for _ in range(12):
        spoken = await speak(client, tenant, README_EXAMPLE, voice_id)
        assert spoken.status_code == 200, spoken.text
        renditions.setdefault(hashlib.sha256(spoken.content).hexdigest(), spoken.content)
    # Whisper decodes the same bytes to the same text, so each distinct rendition is heard once.
    for audio in renditions.values():
        heard = await transcribe(client, tenant, audio, language="en")
        assert heard.status_code == 200, heard.text
        assert words(heard.json()["text"]) == words(README_EXAMPLE)


async def test_openai_voice_names_speak_with_the_default_english_voice(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    async def openai_speech(voice: str) -> bytes:
        body = {"model": "tts-1", "voice": voice, "input": "Hi there.", "response_format": "pcm"}
        response = await client.post(
            "http://testserver/v1/audio/speech", headers=tenant.headers, json=body
        )
        assert response.status_code == 200, response.text
        return response.content

    default, second, *_ = await voice_ids(client, tenant, "en")
    spoken = await openai_speech(default)
    # The bytes tell voices apart: the next English voice says it otherwise.
    assert spoken != await openai_speech(second)
    for name in ("alloy", "nova"):
        assert await openai_speech(name) == spoken, name


@pytest.mark.parametrize("language", ["es", "fr", "it", "pt"])
async def test_each_default_voice_is_understood_on_held_out_sentences(
    client: httpx.AsyncClient, tenant: Tenant, language: str
) -> None:
    """The first held-out sentence (`bench.heldout_sentences`; one, for the suite's time),
    heard back by the service's Whisper told the language: within issue 23's bar of 0.20."""
    text = HELDOUT_SENTENCES[language][0]
    spoken = await speak(client, tenant, text, (await voice_ids(client, tenant, language))[0])
    assert spoken.status_code == 200, spoken.text
    heard = await transcribe(client, tenant, spoken.content, language=language)
    assert heard.status_code == 200, heard.text
    transcript = heard.json()["text"]
    assert word_error_rate(text, transcript, language) <= 0.20, transcript
