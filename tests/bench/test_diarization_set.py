"""Figure 19's conversations (bench/diarization_set.py): real people only, in two halves that
share no one, with the truth of who spoke when."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from bench.diarization_set import (
    DEVELOPMENT,
    HELD_OUT,
    HELD_OUT_ENGLISH,
    OVERLAP_SHARE,
    PER_COUNT,
    SPEAKER_COUNTS,
    TURNS_PER_SPEAKER,
    Conversation,
    check_data,
    conversations,
    heard_clips,
    voice_clips,
)
from bench.recordings import SAMPLE_RATE, SpeechDataMissingError

from bench import diarization_set


@pytest.fixture(scope="module")
def held_out() -> dict[bool, list[Conversation]]:
    return {overlap: conversations("held-out", overlap=overlap) for overlap in (False, True)}


def test_every_voice_is_a_person_recorded_and_no_one_is_in_both_halves() -> None:
    assert not set(HELD_OUT) & set(DEVELOPMENT)
    assert set(HELD_OUT_ENGLISH) <= set(HELD_OUT)
    recorded = diarization_set._POCKETSPHINX_VOICES.keys() | diarization_set._ASTERISK_VOICES
    assert set(HELD_OUT) | set(DEVELOPMENT) == recorded
    assert len(recorded) == 10


def test_each_voice_has_enough_turns_of_one_to_seven_seconds() -> None:
    for speaker in (*HELD_OUT, *DEVELOPMENT):
        clips = voice_clips(speaker)
        assert len(clips) >= TURNS_PER_SPEAKER, speaker
        # The card caller's shortest call is 0.9 s.
        assert all(0.8 * SAMPLE_RATE <= clip.size <= 7 * SAMPLE_RATE for clip in clips), speaker


def test_the_conversations_hear_every_voice_in_the_telephone_band() -> None:
    for speaker in ("librivox reader", "Allison (Asterisk)"):
        for clip in heard_clips(speaker):
            power = np.abs(np.fft.rfft(clip)) ** 2
            hertz = np.fft.rfftfreq(clip.size, 1 / SAMPLE_RATE)
            assert power[hertz > 4_100].sum() < 1e-3 * power.sum(), speaker
    # The same turns, only heard otherwise (the service's tests hear them as recorded).
    sizes = [clip.size for clip in voice_clips("librivox reader")]
    assert [clip.size for clip in heard_clips("librivox reader")] == sizes


def test_each_half_has_two_three_and_four_speaker_conversations_of_its_own_voices(
    held_out: dict[bool, list[Conversation]],
) -> None:
    for overlap, made in held_out.items():
        counts = [len(conversation.speakers) for conversation in made]
        assert counts == [count for count in SPEAKER_COUNTS for _ in range(PER_COUNT)]
        for conversation in made:
            assert conversation.speakers <= set(HELD_OUT)
            assert conversation.name.endswith("/overlap") == overlap
            for before, after in itertools.pairwise(conversation.turns):
                assert before.speaker != after.speaker or before.end <= after.start
    # Seeded: the same conversations every time.
    again = conversations("held-out", overlap=False)
    assert [c.turns for c in again] == [c.turns for c in held_out[False]]


def test_a_tenth_of_the_overlapping_sets_speech_is_two_people_at_once(
    held_out: dict[bool, list[Conversation]],
) -> None:
    for conversation in held_out[True]:
        spoken = sum(turn.end - turn.start for turn in conversation.turns)
        heard, reached = 0.0, 0.0  # the speech time: the turns' union
        for turn in conversation.turns:
            heard += max(0.0, turn.end - max(turn.start, reached))
            reached = max(reached, turn.end)
        assert (spoken - heard) / heard == pytest.approx(OVERLAP_SHARE), conversation.name


def test_missing_prompts_name_the_packages_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(diarization_set, "ASTERISK", tmp_path)
    with pytest.raises(SpeechDataMissingError, match="asterisk-prompt-es-co"):
        check_data()
