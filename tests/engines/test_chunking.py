"""Text and phoneme chunking: bounded pieces that end where a reader would pause."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from voice_service.engines.chunking import (
    FIRST_CHUNK_CHARS,
    MAX_CHUNK_CHARS,
    speakable,
    split_text,
)
from voice_service.engines.piper import MAX_PHONEMES, split_phonemes


def test_sentences_are_pieces_of_their_own() -> None:
    text = 'Hello there. How are you? "Fine." I am, e.g. truly, fine! Next'
    assert split_text(text) == [
        "Hello there.",
        "How are you?",
        '"Fine."',
        "I am, e.g. truly, fine!",
        "Next",
    ]


def test_cjk_full_stops_end_sentences_without_a_space() -> None:
    text = "你好。我很好！谢谢？好"  # noqa: RUF001 (fullwidth marks on purpose)
    assert split_text(text) == ["你好。", "我很好！", "谢谢？", "好"]  # noqa: RUF001


def test_line_breaks_end_sentences() -> None:
    assert split_text("Title\n\nFirst line\nsecond line") == ["Title", "First line", "second line"]


def test_a_long_sentence_is_cut_at_clauses_before_words() -> None:
    clause = "one two three four five six seven eight nine ten, "
    chunks = split_text(clause * 10, max_chars=120)
    assert all(chunk.endswith(",") for chunk in chunks)
    assert all(len(chunk) <= 120 for chunk in chunks)


def test_a_long_clause_is_cut_at_word_boundaries() -> None:
    chunks = split_text("hello " * 100, max_chars=50)
    assert all(set(chunk.split()) == {"hello"} for chunk in chunks)
    assert sum(len(chunk.split()) for chunk in chunks) == 100


def test_a_run_without_spaces_is_cut_hard() -> None:
    assert split_text("x" * 350, max_chars=100) == ["x" * 100] * 3 + ["x" * 50]


def test_control_characters_become_spaces() -> None:
    assert speakable("a\x00b\x1bc\nd") == "a b c\nd"
    assert split_text("\x00\x01\x02") == []


def test_a_stream_s_first_piece_is_short_and_cut_where_it_may_pause() -> None:
    text = "The lighthouse stood at the edge of the cliff. It was old."
    assert split_text(text, first_chars=FIRST_CHUNK_CHARS) == [
        "The lighthouse stood at",
        "the edge of the cliff.",
        "It was old.",
    ]
    assert split_text("Well, this goes on for a while.", first_chars=24)[0] == "Well,"
    assert split_text("Short one. Next.", first_chars=24) == ["Short one.", "Next."]


def _visible(text: str) -> str:
    return "".join(char for char in speakable(text) if not char.isspace())


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(max_size=1200), st.integers(min_value=1, max_value=MAX_CHUNK_CHARS))
def test_pieces_are_bounded_and_lose_nothing_but_space(text: str, max_chars: int) -> None:
    chunks = split_text(text, max_chars)
    assert all(0 < len(chunk) <= max_chars and chunk == chunk.strip() for chunk in chunks)
    quick = split_text(text, max_chars, first_chars=FIRST_CHUNK_CHARS)
    assert not quick or len(quick[0]) <= FIRST_CHUNK_CHARS
    assert quick[1:2] == [] or len(quick[1]) <= max_chars
    assert "".join(_visible(chunk) for chunk in quick) == _visible(text)
    assert "".join(_visible(chunk) for chunk in chunks) == _visible(text)
    assert not any(
        unicodedata.category(char) == "Cc" and char != "\n" for c in chunks for char in c
    )


def test_phonemes_are_cut_after_a_clause_mark_then_a_word() -> None:
    phonemes = list("ab, cd ef gh")
    assert split_phonemes(phonemes, max_phonemes=8) == [list("ab,"), list(" cd ef "), list("gh")]
    assert split_phonemes(list("abcdefghij"), max_phonemes=4) == [
        list("abcd"),
        list("efgh"),
        list("ij"),
    ]


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(["a", "ə", " ", ",", "."]), max_size=3 * MAX_PHONEMES))
def test_phoneme_pieces_are_bounded_and_keep_every_sound(phonemes: list[str]) -> None:
    pieces = split_phonemes(phonemes)
    assert all(len(piece) <= MAX_PHONEMES for piece in pieces)
    kept = [p for piece in pieces for p in piece if not p.isspace()]
    assert kept == [p for p in phonemes if not p.isspace()]
