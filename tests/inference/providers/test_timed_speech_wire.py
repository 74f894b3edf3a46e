"""ElevenLabs' `/with-timestamps` answer as the wire reads it: an answer that breaks its
shape is garbage (the replica failed), never a 500 or a half-read alignment."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from voice_service.audio.output_formats import NAMED_FORMATS
from voice_service.engines.alignment import Alignment
from voice_service.inference.providers.wire import ElevenLabsWire, Garbage, timed_speech_bytes

AUDIO = base64.b64encode(b"\x00\x01" * 4).decode()
GOOD = {
    "characters": ["H", "i"],
    "character_start_times_seconds": [0.0, 0.1],
    "character_end_times_seconds": [0.1, 0.25],
}


def answer(body: Any) -> httpx.Response:
    return httpx.Response(200, json=body)


def test_a_good_answer_gives_its_audio_and_times() -> None:
    audio, alignment = ElevenLabsWire().parse_timed_speech(
        answer({"audio_base64": AUDIO, "alignment": GOOD}), "Hi"
    )
    assert audio == b"\x00\x01" * 4
    assert alignment == Alignment(("H", "i"), (0.0, 0.1), (0.1, 0.25))
    _, empty = ElevenLabsWire().parse_timed_speech(
        answer({"audio_base64": "", "alignment": None}), "Hi"
    )
    assert empty == Alignment()


@pytest.mark.parametrize(
    "body",
    [
        {"alignment": GOOD},
        {"audio_base64": "not base64!", "alignment": GOOD},
        {"audio_base64": AUDIO, "alignment": []},
        {"audio_base64": AUDIO, "alignment": {**GOOD, "characters": ["H"]}},
        {"audio_base64": AUDIO, "alignment": {**GOOD, "characters": ["H", 1]}},
        {"audio_base64": AUDIO, "alignment": {**GOOD, "character_end_times_seconds": [0.1, -1]}},
        {"audio_base64": AUDIO, "alignment": {**GOOD, "character_start_times_seconds": None}},
        ["not", "an", "object"],
    ],
)
def test_a_broken_answer_is_garbage(body: Any) -> None:
    with pytest.raises(Garbage):
        ElevenLabsWire().parse_timed_speech(answer(body), "Hi")


def test_an_alignment_of_other_characters_than_the_text_is_garbage() -> None:
    long = {
        "characters": ["x"] * 3000,
        "character_start_times_seconds": [0.0] * 3000,
        "character_end_times_seconds": [0.1] * 3000,
    }
    for alignment in (GOOD, long):
        with pytest.raises(Garbage, match="not of the text"):
            ElevenLabsWire().parse_timed_speech(
                answer({"audio_base64": AUDIO, "alignment": alignment}), "Hello there."
            )


def test_a_timed_answer_is_bounded_by_what_its_text_can_take() -> None:
    # A few thousand bytes a character, not the megabytes of a 3-million-character alignment.
    bound = timed_speech_bytes(14, NAMED_FORMATS["mp3_44100_128"])
    assert 14 * 64 < bound < 1024 * 1024
