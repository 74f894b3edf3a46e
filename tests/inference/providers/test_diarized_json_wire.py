"""OpenAI's diarized transcription as the wire asks for it and reads it: the diarizing
model and `diarized_json`, its lettered speakers numbered by first speech; an answer that
breaks the shape is garbage (the replica failed)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from voice_service.engines.protocols import TranscribeOptions
from voice_service.inference.providers.wire import (
    DIARIZING_MODEL,
    AudioFile,
    Garbage,
    OpenAIWire,
)

DIARIZED = TranscribeOptions(language="en", diarize=True, word_timestamps=True, prompt="Hi")


def segment(speaker: object, text: str, start: float, end: float) -> dict[str, Any]:
    return {"type": "transcript.text.segment", "id": "seg_0", "speaker": speaker,
            "text": text, "start": start, "end": end}  # fmt: skip


def parsed(body: Any) -> list[tuple[str | None, str, float, float]]:
    transcript = OpenAIWire().parse_transcription(httpx.Response(200, json=body), DIARIZED, 9.0)
    return [(s.speaker, s.text, s.start, s.end) for s in transcript.segments]


def test_the_diarizing_model_is_asked_for_diarized_json() -> None:
    call = OpenAIWire().transcription(AudioFile("a.wav", b"RIFF", "audio/wav"), DIARIZED, None)
    assert call.path == "/audio/transcriptions"
    assert call.data == {
        "model": DIARIZING_MODEL,
        "response_format": "diarized_json",
        "chunking_strategy": "auto",
        "temperature": "0.0",
        "language": "en",
    }  # no prompt, no timestamp granularities: that model takes neither
    named = OpenAIWire().transcription(AudioFile("a.wav", b"", "audio/wav"), DIARIZED, "mine")
    assert named.data is not None and named.data["model"] == "mine"


def test_lettered_speakers_are_numbered_by_first_speech() -> None:
    body = {
        "task": "transcribe",
        "duration": 9.0,
        "text": "Hello. Hi. Bye.",
        "segments": [
            segment("B", " Hello. ", 0.5, 2.0),
            segment("A", "Hi.", 2.5, 3.0),
            segment("B", "Bye.", 4.0, 12.0),
        ],
    }
    assert parsed(body) == [
        ("speaker_0", "Hello.", 0.5, 2.0),
        ("speaker_1", "Hi.", 2.5, 3.0),
        ("speaker_0", "Bye.", 4.0, 9.0),  # not past the audio
    ]


def test_an_answer_without_speakers_has_none() -> None:
    # The node then tells the speakers apart itself.
    assert parsed({"text": "Hello."}) == [(None, "Hello.", 0.0, 9.0)]
    assert parsed({"text": "Hi.", "segments": [segment(None, "Hi.", 0, 1)]}) == [
        (None, "Hi.", 0.0, 1.0)
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"segments": []},
        {"text": "Hi.", "segments": [{"speaker": "A", "start": 0, "end": 1}]},
        {"text": "Hi.", "segments": ["A"]},
    ],
)
def test_an_answer_that_breaks_the_shape_is_garbage(body: Any) -> None:
    with pytest.raises(Garbage):
        parsed(body)
