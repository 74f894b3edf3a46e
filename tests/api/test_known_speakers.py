"""known_speaker_names with known_speaker_references on /speech-to-text: real people named by
a clip of their own voice (another recording than the conversation's), or by the organization's
clone of it; a person who does not speak names no one; every bad reference a 400, unbilled."""

from __future__ import annotations

import io

import httpx
import pytest

from tests.helpers.api import assert_error, clone, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.speakers import (
    CALLER,
    COMMANDS,
    READER,
    conversation,
    data_url,
    reference,
    who_said,
)
from voice_service.audio.encode import wav_of
from voice_service.engines.speaker_embedding import SAMPLE_RATE

pytestmark = pytest.mark.anyio

# The conversation's clips and the references' are different recordings of each person.
TWO = [(READER, 0), (CALLER, 4), (READER, 2), (CALLER, 1)]


ANN = data_url(reference(READER, 3))
BOB = data_url(reference(CALLER, 0, 2, 3))
CY = data_url(reference(COMMANDS, 0, 3))


async def named(
    client: httpx.AsyncClient,
    tenant: Tenant,
    audio: bytes,
    people: list[tuple[str, str]],
    **fields: str,
) -> httpx.Response:
    form: dict[str, str | list[str]] = {"language": "en", "diarize": "true", **fields}
    form["known_speaker_names"] = [name for name, _ in people]
    form["known_speaker_references"] = [ref for _, ref in people]
    return await posted(client, tenant, audio, form)


async def posted(
    client: httpx.AsyncClient, tenant: Tenant, audio: bytes, form: dict[str, str | list[str]]
) -> httpx.Response:
    return await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        files={"file": ("talk.wav", io.BytesIO(audio), "audio/wav")},
        data=form,  # each list a field repeated, in order
    )


async def test_references_name_the_people_who_speak(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio, truth = conversation(TWO)
    response = await named(client, tenant, audio, [("Bob", BOB), ("Ann", ANN)], timestamps="word")
    assert response.status_code == 200, response.text
    segments = response.json()["segments"]
    assert who_said(segments, truth) == {"Ann": READER, "Bob": CALLER}
    assert {word["speaker"] for segment in segments for word in segment["words"]} == {"Ann", "Bob"}


async def test_someone_who_does_not_speak_names_no_one(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio, truth = conversation(TWO)
    response = await named(client, tenant, audio, [("Cy", CY), ("Ann", ANN)])
    assert response.status_code == 200, response.text
    assert who_said(response.json()["segments"], truth) == {"Ann": READER, "speaker_1": CALLER}


async def test_an_absent_person_with_a_near_voice_names_no_one(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """The card caller's reference is the nearest of these voices to the reader's speech,
    above the clustering's own threshold: named alone, with the reader speaking and the
    caller not, he is no one's name (diarization.KNOWN_SIMILARITY)."""
    audio, truth = conversation([(READER, 0), (COMMANDS, 1), (READER, 2), (COMMANDS, 2)])
    response = await named(client, tenant, audio, [("Bob", BOB)])
    assert response.status_code == 200, response.text
    assert who_said(response.json()["segments"], truth) == {
        "speaker_0": READER,
        "speaker_1": COMMANDS,
    }


async def test_a_clone_of_the_organization_names_its_speaker(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    sample = wav_of(reference(READER, 3, 4), SAMPLE_RATE)
    made = await clone(client, tenant, sample, name="Ann's voice")
    assert made.status_code == 201, made.text
    voice_id = made.json()["voice"]["id"]
    audio, truth = conversation(TWO)
    response = await named(client, tenant, audio, [("Ann", voice_id)])
    assert response.status_code == 200, response.text
    assert who_said(response.json()["segments"], truth) == {"Ann": READER, "speaker_1": CALLER}

    # Another organization's clone is no reference of this one's.
    other = await tenants.create()
    response = await named(client, other, audio, [("Ann", voice_id)])
    message = assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert message.startswith("known_speaker_references[0]"), message
    assert voice_id in message


@pytest.mark.parametrize(
    ("people", "fields", "field"),
    [
        ([("Ann", ANN)], {"diarize": "false"}, "known_speaker_names"),
        ([("Ann", ANN), ("Ann", BOB)], {}, "known_speaker_names[1]"),
        ([("speaker_1", ANN)], {}, "known_speaker_names[0]"),
        ([(" Ann", ANN)], {}, "known_speaker_names[0]"),
        ([(f"P{n}", ANN) for n in range(5)], {}, "known_speaker_names"),
        ([("Ann", "https://example.com/ann.wav")], {}, "known_speaker_references[0]"),
        ([("Ann", "data:audio/wav;base64,%%%")], {}, "known_speaker_references[0]"),
        ([("Ann", "data:text/plain;base64,aGk=")], {}, "known_speaker_references[0]"),
        ([("Ann", ANN), ("Bob", "data:audio/wav;base64,aGk=")], {}, "known_speaker_references[1]"),
        ([("Ann", data_url(reference(READER, 1)[:16000]))], {}, "known_speaker_references[0]"),
        ([("Ann", data_url(reference(READER, 0, 1, 2)))], {}, "known_speaker_references[0]"),
        ([("Ann", "voice_000000000000000000000000")], {}, "known_speaker_references[0]"),
    ],
)
async def test_bad_references_are_400s_unbilled(
    client: httpx.AsyncClient,
    tenant: Tenant,
    tenants: Tenants,
    people: list[tuple[str, str]],
    fields: dict[str, str],
    field: str,
) -> None:
    audio, _ = conversation(TWO[:2])
    response = await named(client, tenant, audio, people, **fields)
    message = assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert message.startswith(field), message
    assert await usage_units(tenants, tenant.org_id) == []


async def test_a_name_without_its_reference_is_a_400(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio, _ = conversation(TWO[:2])
    response = await posted(
        client, tenant, audio, {"diarize": "true", "known_speaker_names": "Ann"}
    )
    message = assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert message.startswith("known_speaker_names[]: one name for each"), message


async def test_only_references_may_be_long_fields(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio, _ = conversation(TWO[:2])
    response = await posted(client, tenant, audio, {"diarize": "true", "language": "e" * 20_000})
    message = assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert message.startswith("language: a form field is longer than"), message
