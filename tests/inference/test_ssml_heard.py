"""SSML said by every engine, measured: a break lasts what it says by the VAD, and a
telephone number read digit by digit is heard so, in English and Spanish, by the node's
Whisper (its base model hears French digits said alone badly, whatever the voice: "un" as
"à" or "en"; docs/api.md)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from bench.audio import to_16k

from tests.helpers.inference import heard
from tests.helpers.voices import JOE_KEY
from voice_service.audio.vad import WINDOW, ServerVad, SpeechDetector
from voice_service.engines.protocols import Pcm
from voice_service.engines.ssml import parse
from voice_service.inference.engines import Engines

VOICES = [JOE_KEY, "kokoro:jm_kumo:en", "espeak:en-us"]


def said(engines: Engines, voice: str, document: str, language: str) -> Pcm:
    chunks = [part() for part in engines.script_parts(voice, None, parse(document, language))]
    samples = np.concatenate([chunk.pcm.samples for chunk in chunks])
    return Pcm(samples, chunks[0].pcm.sample_rate)


def longest_pause(pcm: Pcm) -> float:
    """The longest silence between speech, by Silero's VAD (32 ms windows)."""
    speech = SpeechDetector(ServerVad()).judge(to_16k(pcm)) >= 0.5
    spoken = np.flatnonzero(speech)
    runs = np.diff(spoken) - 1
    return float(runs.max()) * WINDOW / 16_000 if runs.size else 0.0


@pytest.mark.parametrize("voice", VOICES)
def test_a_700_ms_break_is_700_ms_of_silence(engines: Engines, voice: str) -> None:
    document = "<speak>Please hold the line.<break time='700ms'/>Your call matters.</speak>"
    assert 0.65 <= longest_pause(said(engines, voice, document, "en")) <= 0.8


@pytest.mark.parametrize(
    ("voice", "language", "number"),
    [
        (JOE_KEY, "en", "617 2084"),
        # Whisper base, on one CPU, heard this one's last digit as an 8 said over and over,
        # until such a loop was decoded again (`whisper.loops`).
        (JOE_KEY, "en", "607 2184"),
        ("kokoro:jm_kumo:es", "es", "617 2084"),
    ],
)
def test_a_telephone_number_is_heard_digit_by_digit(
    engines: Engines, voice: str, language: str, number: str
) -> None:
    # No digit twice in a row: Whisper base may write a repeated digit heard once
    # ("5, 5, 5" as "5, 5"), on one CPU and not another.
    document = f"<speak><say-as interpret-as='telephone'>{number}</say-as></speak>"
    pcm = said(engines, voice, document, language)
    transcript = heard(engines, pcm, language)
    # Whisper writes digits heard one by one as digits: none read as "six hundred and seven".
    assert re.sub(r"\D", "", transcript) == number.replace(" ", ""), transcript


def test_breaks_at_either_end_are_silence_of_their_length(engines: Engines) -> None:
    pcm = said(
        engines,
        JOE_KEY,
        "<speak><break time='500ms'/>Hello.<break time='1s'/><break time='250ms'/></speak>",
        "en",
    )
    loud = np.flatnonzero(np.abs(pcm.samples.astype(np.int32)) > 500)
    rate = pcm.sample_rate
    assert loud[0] / rate == pytest.approx(0.5 + 0.02, abs=0.01)  # and the onset kept
    assert (pcm.samples.size - loud[-1]) / rate == pytest.approx(1.25 + 0.02, abs=0.01)
