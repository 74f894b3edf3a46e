"""/v1/audio/speech and /v1/models through OpenAI's own Python SDK."""

from __future__ import annotations

import base64
import json

import httpx
import openai
import pytest

from tests.helpers.live import LiveServer, audio_duration
from voice_service.core.ids import catalogue_voice_id
from voice_service.engines.catalog import CLONE_BASE_VOICE

TEXT = "The weather is lovely today. We could walk along the river after lunch."
SENTENCES = (
    "The first sentence is spoken right away.",
    "The second one follows while the first is playing.",
    "A third sentence keeps the stream going.",
    "The fourth sentence is almost the last.",
    "And this fifth sentence ends the paragraph.",
)
# Codec and rate PyAV finds in each format (None: the voice's own rate, 22.05 kHz).
EXPECTED = {
    "mp3": ("mp3float", 22050),
    "opus": ("opus", 48000),
    "aac": ("aac", 22050),
    "flac": ("flac", 22050),
    "wav": ("pcm_s16le", 22050),
}


@pytest.fixture(scope="module")
def client(live: LiveServer) -> openai.OpenAI:
    tenant = live.tenant()
    return openai.OpenAI(base_url=f"{live.root}/v1", api_key=tenant.secret, max_retries=0)


def test_models_lists_speech_and_transcription_models(client: openai.OpenAI) -> None:
    ids = {model.id for model in client.models.list().data}
    assert {"tts-1", "gpt-4o-mini-tts", "whisper-1"} <= ids
    assert client.models.retrieve("whisper-1").id == "whisper-1"


def test_every_response_format_decodes_with_its_codec_and_the_text_s_duration(
    client: openai.OpenAI,
) -> None:
    reference = None
    for fmt, (codec, rate) in EXPECTED.items():
        audio = client.audio.speech.create(
            model="tts-1",
            voice="alloy",
            input=TEXT,
            response_format=fmt,  # type: ignore[arg-type]
        ).content
        found_codec, found_rate, seconds = audio_duration(audio)
        assert (found_codec, found_rate) == (codec, rate), fmt
        reference = reference or seconds
        # Piper varies durations slightly from call to call; a wrong rate would be 2x off.
        assert 0.8 * reference < seconds < 1.25 * reference, (fmt, seconds, reference)
    pcm = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="pcm"
    ).content
    assert len(pcm) % 2 == 0
    assert reference is not None
    assert 0.8 * reference < len(pcm) / 2 / 24_000 < 1.25 * reference  # 16-bit at 24 kHz


@pytest.mark.parametrize(("speed", "low", "high"), [(2.0, 0.4, 0.65), (0.5, 1.6, 2.5)])
def test_speed_changes_the_duration(
    client: openai.OpenAI, speed: float, low: float, high: float
) -> None:
    def seconds(speed: float) -> float:
        audio = client.audio.speech.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="wav", speed=speed
        ).content
        return audio_duration(audio)[2]

    assert low < seconds(speed) / seconds(1.0) < high


def test_a_voice_can_be_an_id_or_an_object(client: openai.OpenAI) -> None:
    catalogue_id = catalogue_voice_id(CLONE_BASE_VOICE)  # Piper's Joe, whom "nova" names
    for voice in (catalogue_id, {"id": catalogue_id}):
        audio = client.audio.speech.create(
            model="tts-1",
            voice=voice,
            input="Hello.",
            response_format="wav",  # type: ignore[arg-type]
        ).content
        assert audio_duration(audio)[2] > 0.2


def test_streaming_response_starts_before_the_last_sentence_is_synthesized(
    live: LiveServer, client: openai.OpenAI
) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=" ".join(SENTENCES), response_format="mp3"
    ) as response:
        request_id = response.headers["x-request-id"]
        chunks = list(response.iter_bytes(chunk_size=None))  # type: ignore[arg-type]
    assert len(chunks) >= 3
    assert audio_duration(b"".join(chunks))[2] > 5.0
    # Server-side order: the first audio went to the client before the engine started on
    # the last sentence (the pool makes one chunk ahead of what the client has taken).
    events = live.log.of(request_id)
    first_sent = next(i for i, e in enumerate(events) if "handed" in e)
    spoken = [i for i, e in enumerate(events) if " spoke chunk " in e]
    assert len(spoken) > len(SENTENCES)  # the first sentence is cut short to start soon
    assert first_sent < spoken[-1], events
    assert live.log_row(request_id).bytes_sent == len(b"".join(chunks))
    assert live.usage_units(request_id) == [len(" ".join(SENTENCES))]


def test_sse_sends_base64_deltas_then_done_with_usage(client: openai.OpenAI) -> None:
    body = client.audio.speech.create(
        model="gpt-4o-mini-tts",
        voice="alloy",
        input=TEXT,
        response_format="mp3",
        stream_format="sse",
    ).content
    events = [
        json.loads(line.removeprefix("data: "))
        for line in body.decode().split("\n")
        if line.startswith("data: ")
    ]
    *deltas, done = events
    assert {event["type"] for event in deltas} == {"speech.audio.delta"}
    audio = b"".join(base64.b64decode(event["audio"]) for event in deltas)
    assert audio_duration(audio)[0] == "mp3float"
    assert done == {
        "type": "speech.audio.done",
        "usage": {"input_tokens": len(TEXT), "output_tokens": 0, "total_tokens": len(TEXT)},
    }


@pytest.mark.anyio
async def test_the_async_client_speaks(live: LiveServer) -> None:
    tenant = await live.tenants.create()
    async with openai.AsyncOpenAI(
        base_url=f"{live.root}/v1", api_key=tenant.secret, max_retries=0
    ) as client:
        response = await client.audio.speech.create(
            model="tts-1", voice="echo", input=TEXT, response_format="flac"
        )
        assert audio_duration(response.content)[0] == "flac"


def test_a_pronunciation_dictionary_in_extra_body_is_heard(
    live: LiveServer, client: openai.OpenAI
) -> None:
    made = httpx.post(
        f"{live.root}/api/v1/pronunciation-dictionaries/add-from-rules",
        headers={"Authorization": f"Bearer {client.api_key}"},
        json={
            "name": "Our stack",
            "rules": [{"type": "alias", "string_to_replace": "VS", "alias": "Voice Service"}],
        },
    )
    assert made.status_code == 201, made.text
    locator = {"pronunciation_dictionary_id": made.json()["id"]}

    audio = client.audio.speech.create(
        model="tts-1",
        voice="alloy",
        input="Welcome to VS.",
        response_format="wav",
        extra_body={"pronunciation_dictionary_locators": [locator]},
    ).content
    heard = client.audio.transcriptions.create(model="whisper-1", file=("a.wav", audio))
    assert "voice service" in heard.text.lower()


def test_a_language_code_in_extra_body_is_checked_against_the_voice(
    client: openai.OpenAI,
) -> None:
    said = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello.", extra_body={"language_code": "en"}
    )
    assert audio_duration(said.content)[2] > 0.3
    with pytest.raises(openai.BadRequestError) as refused:
        client.audio.speech.create(
            model="tts-1", voice="alloy", input="Hola.", extra_body={"language_code": "es"}
        )
    assert "speaks en." in str(refused.value)
