"""Speech at a requested speed, on every engine and for clones: the engine's own timing
where it reaches the speed, a time-stretch for the rest; heard back by the node's Whisper."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from bench.people import people
from bench.wer import word_errors

from tests.helpers.inference import heard
from tests.helpers.voices import JOE_KEY
from voice_service.engines.protocols import Pcm
from voice_service.engines.world import analyse_sample
from voice_service.inference.engines import Engines

TEXT = "Please send the quarterly report to the finance team before Friday afternoon."
VOICES = [JOE_KEY, "kokoro:jm_kumo:en", "espeak:en-us", "clone"]


@pytest.fixture(scope="module")
def clone_profile() -> dict[str, Any]:
    """A real person's profile (spoken through the default base, Joe)."""
    person = next(person for person in people() if person.name == "LibriVox reader")
    sample = Pcm((np.clip(person.sample, -1, 1) * 32767).astype(np.int16), 16_000)
    return analyse_sample(sample).to_dict()


def said(engines: Engines, voice: str, profile: Mapping[str, Any], speed: float) -> Pcm:
    if voice == "clone":
        return engines.chunk_speaker(JOE_KEY, profile, speed)(TEXT)
    return engines.chunk_speaker(voice, None, speed)(TEXT)


@pytest.mark.parametrize("voice", VOICES)
def test_one_and_a_half_times_as_fast_is_two_thirds_as_long_and_still_understood(
    engines: Engines, clone_profile: dict[str, Any], voice: str
) -> None:
    plain = said(engines, voice, clone_profile, 1.0)
    fast = said(engines, voice, clone_profile, 1.5)

    assert fast.duration_seconds / plain.duration_seconds == pytest.approx(1 / 1.5, rel=0.1)
    # Understood: at most two of its twelve words misheard. eSpeak's formant voice at 1.5x
    # is at Whisper base's edge, and which of its words it mishears differs between CPUs
    # (one on one, two on another: "finance team" heard as "final sting").
    assert word_errors(TEXT, heard(engines, fast, "en"))[0] <= 2
    if plain.word_times:  # the words' times are the faster audio's own
        assert fast.word_times[-1][1] <= fast.duration_seconds
        assert fast.word_times[-1][1] < plain.word_times[-1][1] * 0.8


@pytest.mark.parametrize("speed", [0.3, 4.0])
def test_espeak_beyond_its_rates_is_stretched_the_rest_of_the_way(
    engines: Engines, clone_profile: dict[str, Any], speed: float
) -> None:
    plain = said(engines, "espeak:en-us", clone_profile, 1.0)
    changed = said(engines, "espeak:en-us", clone_profile, speed)

    assert changed.duration_seconds / plain.duration_seconds == pytest.approx(1 / speed, rel=0.1)
