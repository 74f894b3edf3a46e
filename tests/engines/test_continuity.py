"""A sentence said in two parts, each with the other as its context, is the sentence said
once: the same audio, cut between two words, so neither part ends or starts as a sentence
would where it goes on."""

from __future__ import annotations

import numpy as np
import pytest
from bench.audio import to_16k
from bench.wer import word_error_rate

from tests.helpers.voices import JOE_KEY
from voice_service.engines.continuity import (
    CONTEXT_CHARS,
    NO_CONTEXT,
    Context,
    context_of,
    said_in_context,
)
from voice_service.engines.protocols import TranscribeOptions
from voice_service.inference.engines import Engines

FIRST = "I went to the market"
SECOND = "and bought some fresh bread for dinner."


def test_an_unfinished_sentence_takes_its_neighbours_words_up_to_the_sentence_ends() -> None:
    assert context_of("It rained. " + FIRST, SECOND, None) == Context(before=FIRST)
    assert context_of(None, FIRST, SECOND + " Then we left.") == Context(after=SECOND)
    assert context_of("It rained.", FIRST, "Then we left.") == Context(after="Then we left.")
    # A finished sentence neither needs the one before nor goes on into the next.
    assert context_of("It rained.", "We left.", "and more") == NO_CONTEXT
    assert context_of("  ", FIRST + ",", "\n") == NO_CONTEXT
    # Control characters, which engines choke on, are spaces there as in the text.
    assert context_of("went\x00to the", FIRST, None) == Context(before="went to the")


def test_context_is_at_most_its_length_in_whole_words() -> None:
    words = " ".join(["word"] * 40)
    context = context_of(words, FIRST, words)
    assert len(context.before) <= CONTEXT_CHARS and len(context.after) <= CONTEXT_CHARS
    assert context.before.split() == ["word"] * len(context.before.split())
    assert len(context.before) > CONTEXT_CHARS - len(" word")


@pytest.mark.parametrize("voice", [JOE_KEY, "kokoro:jm_kumo:en"])
def test_two_parts_said_in_context_are_the_sentence_said_once(engines: Engines, voice: str) -> None:
    say = engines.chunk_speaker(voice, None)
    once = say(f"{FIRST} {SECOND}")
    first = said_in_context(say, FIRST, Context(after=SECOND))
    second = said_in_context(say, SECOND, Context(before=FIRST))

    fade = round(0.005 * once.sample_rate)
    assert abs(first.samples.size + second.samples.size - once.samples.size) <= 1
    cut = first.samples.size
    assert np.array_equal(first.samples[:-fade], once.samples[: cut - fade])
    assert np.array_equal(second.samples[fade:], once.samples[-second.samples.size + fade :])
    # The first part does not end as a sentence would: it is shorter than said alone.
    assert first.duration_seconds < say(FIRST).duration_seconds
    # Each part's words are its own, timed within its audio.
    assert len(first.word_times) == len(FIRST.split())
    assert all(end <= first.duration_seconds for _, end in first.word_times)


def test_the_context_is_not_heard(engines: Engines) -> None:
    say = engines.chunk_speaker(JOE_KEY, None)
    first = said_in_context(say, FIRST, Context(after=SECOND))
    stream = engines.transcribers.model(None).stream(to_16k(first), TranscribeOptions("en"))
    heard = " ".join(segment.text for segment in stream.segments)
    assert word_error_rate(FIRST, heard) == 0, heard


def test_a_voice_without_word_times_says_the_part_alone(engines: Engines) -> None:
    say = engines.chunk_speaker("espeak:en-us", None)
    part = said_in_context(say, FIRST, Context(after=SECOND))
    assert not part.word_times
    assert part.duration_seconds == pytest.approx(say(FIRST).duration_seconds, rel=0.05)
