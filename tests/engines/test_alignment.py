"""The text's characters timed from the words an engine says it spoke (engines/alignment.py)."""

from __future__ import annotations

import numpy as np
import pytest

from voice_service.engines.alignment import Alignment, TextTimer
from voice_service.engines.chunking import split_text
from voice_service.engines.protocols import Pcm, WordTime

RATE = 1000


def pcm(seconds: float, words: list[WordTime]) -> Pcm:
    return Pcm(np.zeros(round(seconds * RATE), dtype=np.int16), RATE, tuple(words))


def timed(text: str, chunks: list[tuple[float, list[WordTime]]]) -> Alignment:
    timer = TextTimer(text)
    alignment = Alignment()
    for piece, (seconds, words) in zip(split_text(text), chunks, strict=True):
        alignment += timer.chunk(piece, pcm(seconds, words))
    return alignment + timer.rest()


def starts_of_words(text: str, alignment: Alignment) -> list[float]:
    return [
        alignment.starts[i]
        for i, c in enumerate(text)
        if c != " " and (i == 0 or text[i - 1] == " ")
    ]


def test_words_said_as_written_get_the_engines_spans() -> None:
    text = "Hello big world."
    alignment = timed(text, [(2.0, [(0.1, 0.5), (0.6, 0.9), (1.0, 1.8)])])
    assert "".join(alignment.characters) == text
    assert starts_of_words(text, alignment) == [0.1, 0.6, 1.0]
    # Characters share their word's span; a space lasts from one word to the next.
    assert alignment.starts[:5] == pytest.approx((0.1, 0.18, 0.26, 0.34, 0.42))
    assert alignment.ends[4] == 0.5
    assert (alignment.starts[5], alignment.ends[5]) == (0.5, 0.6)


def test_chunks_follow_each_other_and_the_spaces_between_them_are_timed() -> None:
    text = "  One.   Two!  "
    alignment = timed(text, [(1.0, [(0.2, 0.8)]), (1.5, [(0.3, 1.2)])])
    assert "".join(alignment.characters) == text
    assert starts_of_words(text, alignment)[-1] == 1.3  # after the first chunk's second
    assert alignment.starts[:2] == (0.0, 0.0)  # leading spaces before the first word
    assert alignment.ends[-1] == 2.5  # trailing ones at the end of the audio
    assert list(alignment.starts) == sorted(alignment.starts)


def test_a_number_said_as_three_words_is_one_text_word() -> None:
    text = "In 2024 we won."
    spoken = [(0.0, 0.2), (0.3, 0.7), (0.7, 1.1), (1.1, 1.5), (1.6, 1.8), (1.9, 2.2)]
    alignment = timed(text, [(2.5, spoken)])
    assert starts_of_words(text, alignment) == [0.0, 0.3, 1.6, 1.9]
    assert alignment.ends[text.index("4")] == 1.5


def test_two_words_said_as_one_share_its_span_by_letters() -> None:
    text = "Il est un ami."
    spoken = [(0.0, 0.2), (0.3, 0.9), (1.0, 1.4)]  # "est un" linked
    alignment = timed(text, [(1.5, spoken)])
    starts = starts_of_words(text, alignment)
    assert starts[0] == 0.0 and starts[3] == 1.0
    assert starts[1] == 0.3
    assert 0.3 < starts[2] < 0.9


def test_without_word_times_the_text_is_spread_over_the_audio() -> None:
    text = "No times here"
    alignment = timed(text, [(1.3, [])])
    assert alignment.starts[0] == 0.0
    assert alignment.ends[-1] == 1.3
    assert list(alignment.starts) == sorted(alignment.starts)


def test_control_characters_are_timed_as_the_text_has_them() -> None:
    text = "Bell\x07 rings."
    alignment = timed(text, [(1.0, [(0.1, 0.4), (0.5, 0.9)])])
    assert "".join(alignment.characters) == text
    assert len(alignment.starts) == len(text)
