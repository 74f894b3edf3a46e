"""The ElevenLabs peer speaks ElevenLabs' protocol: the provider tests lean on it."""

from __future__ import annotations

import io
from collections.abc import Iterator

import av
import httpx
import pytest

from tests.helpers.elevenlabs_peer import RACHEL, ElevenLabsPeer, elevenlabs_peer

TEXT = "The peer speaks."  # 16 characters: 0.96 s of audio


@pytest.fixture(scope="module")
def served() -> Iterator[ElevenLabsPeer]:
    with elevenlabs_peer() as started:
        yield started


@pytest.fixture
def peer(served: ElevenLabsPeer) -> ElevenLabsPeer:
    served.reset()
    return served


@pytest.fixture
def client(peer: ElevenLabsPeer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=peer.base_url, headers={"xi-api-key": peer.api_key}) as http:
        yield http


def decoded(data: bytes) -> tuple[int, float]:
    """Sample rate and decoded length of an audio file, by PyAV."""
    with av.open(io.BytesIO(data), "r") as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return stream.rate, samples / stream.rate


@pytest.mark.parametrize("key", [None, "wrong"])
def test_a_request_without_the_key_is_refused(peer: ElevenLabsPeer, key: str | None) -> None:
    headers = {} if key is None else {"xi-api-key": key}
    answer = httpx.post(
        f"{peer.base_url}/v1/text-to-speech/{RACHEL}", json={"text": TEXT}, headers=headers
    )
    assert answer.status_code == 401
    assert answer.json() == {"detail": {"status": "invalid_api_key", "message": "Invalid API key"}}


@pytest.mark.parametrize(
    ("output_format", "rate"), [("mp3_44100_128", 44100), ("mp3_22050_32", 22050)]
)
def test_speech_is_mp3_at_the_format_rate(
    client: httpx.Client, output_format: str, rate: int
) -> None:
    answer = client.post(
        f"/v1/text-to-speech/{RACHEL}",
        params={"output_format": output_format},
        json={"text": TEXT, "model_id": "eleven_multilingual_v2"},
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "audio/mpeg"
    decoded_rate, seconds = decoded(answer.content)
    assert decoded_rate == rate
    assert seconds == pytest.approx(0.96, abs=0.1)  # the encoder's delay and last-frame padding


@pytest.mark.parametrize("rate", [16000, 22050, 24000, 44100])
def test_pcm_is_raw_s16le_at_the_rate(client: httpx.Client, rate: int) -> None:
    answer = client.post(
        f"/v1/text-to-speech/{RACHEL}", params={"output_format": f"pcm_{rate}"}, json={"text": TEXT}
    )
    assert answer.headers["content-type"] == "audio/pcm"
    assert len(answer.content) == round(rate * 0.96) * 2


def test_the_stream_comes_in_chunks_that_join_to_the_whole(client: httpx.Client) -> None:
    whole = client.post(f"/v1/text-to-speech/{RACHEL}", json={"text": TEXT}).content
    with client.stream(
        "POST", f"/v1/text-to-speech/{RACHEL}/stream", json={"text": TEXT}
    ) as answer:
        assert answer.headers["transfer-encoding"] == "chunked"
        assert answer.headers["content-type"] == "audio/mpeg"
        chunks = list(answer.iter_raw())
    assert len(chunks) > 1
    assert b"".join(chunks) == whole


def test_an_unknown_output_format_fails_validation(client: httpx.Client) -> None:
    answer = client.post(
        f"/v1/text-to-speech/{RACHEL}", params={"output_format": "wav_1"}, json={"text": TEXT}
    )
    assert answer.status_code == 422
    [problem] = answer.json()["detail"]
    assert problem["loc"] == ["query", "output_format"]


def test_speech_without_text_fails_validation(client: httpx.Client) -> None:
    answer = client.post(f"/v1/text-to-speech/{RACHEL}", json={"model_id": "eleven_flash_v2_5"})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "text"]


def test_an_unknown_voice_is_voice_not_found(client: httpx.Client) -> None:
    answer = client.post("/v1/text-to-speech/nobody/stream", json={"text": TEXT})
    assert answer.status_code == 404
    assert answer.json()["detail"]["status"] == "voice_not_found"


def test_transcription_answers_the_documented_shape(
    peer: ElevenLabsPeer, client: httpx.Client
) -> None:
    audio = client.post(f"/v1/text-to-speech/{RACHEL}", json={"text": TEXT}).content
    peer.transcript_text = "one two three"
    answer = client.post(
        "/v1/speech-to-text",
        data={"model_id": "scribe_v1"},
        files={"file": ("clip.mp3", audio, "audio/mpeg")},
    )
    assert answer.status_code == 200
    transcript = answer.json()
    assert transcript["language_code"] == "eng"
    assert 0 < transcript["language_probability"] <= 1
    assert transcript["text"] == "one two three"
    words = transcript["words"]
    assert [(w["text"], w["type"]) for w in words] == [
        ("one", "word"), (" ", "spacing"), ("two", "word"), (" ", "spacing"), ("three", "word")
    ]  # fmt: skip
    starts = [w["start"] for w in words]
    assert starts == sorted(starts)
    assert words[0]["start"] >= 0
    assert words[-1]["end"] <= decoded(audio)[1]


def test_transcription_answers_a_given_language_in_iso_639_3(client: httpx.Client) -> None:
    answer = client.post(
        "/v1/speech-to-text",
        data={"model_id": "scribe_v2", "language_code": "de"},
        files={"file": ("clip.wav", b"not decoded", "audio/wav")},
    )
    assert answer.json()["language_code"] == "deu"


def test_transcription_without_a_model_fails_validation(client: httpx.Client) -> None:
    answer = client.post("/v1/speech-to-text", files={"file": ("clip.wav", b"RIFF", "audio/wav")})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "model_id"]


def test_an_added_voice_speaks_until_deleted(peer: ElevenLabsPeer, client: httpx.Client) -> None:
    added = client.post(
        "/v1/voices/add",
        data={"name": "Ada", "description": "calm", "labels": '{"accent": "british"}'},
        files=[
            ("files", ("a.wav", b"x" * 100, "audio/wav")),
            ("files", ("b.wav", b"y" * 50, "audio/wav")),
        ],
    )
    assert added.status_code == 200
    voice_id = added.json()["voice_id"]
    assert added.json() == {"voice_id": voice_id, "requires_verification": False}
    assert peer.voices[voice_id].labels == {"accent": "british"}
    assert [(f.filename, f.size) for f in peer.requests[-1].files] == [
        ("a.wav", 100),
        ("b.wav", 50),
    ]
    assert client.get(f"/v1/voices/{voice_id}").json()["name"] == "Ada"
    assert client.post(f"/v1/text-to-speech/{voice_id}", json={"text": TEXT}).status_code == 200

    assert client.delete(f"/v1/voices/{voice_id}").json() == {"status": "ok"}
    assert client.get(f"/v1/voices/{voice_id}").status_code == 404
    assert client.delete(f"/v1/voices/{voice_id}").json()["detail"]["status"] == "voice_not_found"


def test_adding_a_voice_without_files_fails_validation(client: httpx.Client) -> None:
    answer = client.post("/v1/voices/add", data={"name": "Ada"})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "files"]


def test_fail_next_answers_that_many_requests_then_recovers(
    peer: ElevenLabsPeer, client: httpx.Client
) -> None:
    peer.fail_next(429, 2)
    first, second, third = (client.get(f"/v1/voices/{RACHEL}") for _ in range(3))
    assert first.status_code == second.status_code == 429
    assert first.json()["detail"]["status"] == "too_many_concurrent_requests"
    assert third.status_code == 200


def test_requests_are_recorded_as_sent(peer: ElevenLabsPeer, client: httpx.Client) -> None:
    client.post(
        f"/v1/text-to-speech/{RACHEL}",
        params={"output_format": "pcm_16000"},
        json={"text": "hi", "voice_settings": {"stability": 0.5}},
    )
    [request] = peer.requests
    assert (request.method, request.path) == ("POST", f"/v1/text-to-speech/{RACHEL}")
    assert request.query == {"output_format": "pcm_16000"}
    assert request.headers["xi-api-key"] == peer.api_key
    assert request.json == {"text": "hi", "voice_settings": {"stability": 0.5}}
