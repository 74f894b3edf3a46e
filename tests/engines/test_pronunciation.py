"""Pronunciation rules applied to a text: PLS's matching (exact case unless a rule says
otherwise, whole words unless it says otherwise, the longest match, the first dictionary's
rule), phonemes in their alphabets, and word times mapped back onto the words as written."""

from __future__ import annotations

import numpy as np
import pytest

from voice_service.engines.pronunciation import (
    Alphabet,
    InvalidPhonemes,
    Lexicon,
    Rule,
    ipa_of,
    pronounced,
)
from voice_service.engines.protocols import PHONEMES_CLOSE, PHONEMES_OPEN, Pcm


def spoken(lexicon: Lexicon, text: str) -> str:
    return lexicon.rewrite(text).spoken


def test_a_rule_matches_whole_words_in_its_own_case() -> None:
    lexicon = Lexicon([Rule("VS", alias="Voice Service")])
    assert spoken(lexicon, "VS, not vs, nor VSCode.") == "Voice Service, not vs, nor VSCode."


def test_rules_may_ignore_case_and_match_inside_words() -> None:
    lexicon = Lexicon(
        [
            Rule("sql", alias="sequel", case_sensitive=False),
            Rule("k8s", alias="kubernetes", word_boundaries=False),
        ]
    )
    assert spoken(lexicon, "SQL and MySQL on mk8s.") == "sequel and MySQL on mkubernetes."


def test_the_longest_match_wins_and_the_first_dictionarys_rule_for_a_text() -> None:
    first = [Rule("New York", alias="the Big Apple"), Rule("York", alias="first")]
    second = [Rule("York", alias="second"), Rule("New York City", alias="NYC")]
    lexicon = Lexicon([*first, *second])
    assert spoken(lexicon, "New York City, New York and York.") == ("NYC, the Big Apple and first.")


def test_a_phoneme_rule_gives_the_engine_its_ipa_apart_from_the_words_around_it() -> None:
    lexicon = Lexicon([Rule("gif", phonemes="dʒɪf", word_boundaries=False)])
    assert spoken(lexicon, "a gif.") == f"a {PHONEMES_OPEN}dʒɪf{PHONEMES_CLOSE}."
    assert spoken(lexicon, "gifs") == f"{PHONEMES_OPEN}dʒɪf{PHONEMES_CLOSE} s"


def test_phonemes_already_in_the_text_are_left_as_they_are() -> None:
    lexicon = Lexicon([Rule("t", alias="tee", word_boundaries=False)])
    marked = f"{PHONEMES_OPEN}tɑːt{PHONEMES_CLOSE}"
    assert spoken(lexicon, f"at {marked}") == f"atee {marked}"


def test_aliased_leaves_phoneme_rules_out() -> None:
    lexicon = Lexicon([Rule("Bob", phonemes="tɑːm"), Rule("VS", alias="Voice Service")])
    assert lexicon.aliased("Bob at VS") == "Bob at Voice Service"


@pytest.mark.parametrize(
    ("written", "alphabet", "ipa"),
    [
        ("T AH0 M EY1 T OW2", Alphabet.CMU_ARPABET, "təmˈeɪtˌoʊ"),
        ("ER1 TH", Alphabet.CMU_ARPABET, "ˈɜːθ"),
        ("/tə'meɪ.toʊ/", Alphabet.IPA, "təmˈeɪtoʊ"),
        ("ˈkuːbərˌneɪtiːz", Alphabet.IPA, "kˈuːbərnˌeɪtiːz"),
        ("ʧɪp", Alphabet.IPA, "tʃɪp"),
    ],
)
def test_phonemes_are_written_as_espeak_ng_writes_ipa(
    written: str, alphabet: Alphabet, ipa: str
) -> None:
    assert ipa_of(written, alphabet) == ipa


@pytest.mark.parametrize(
    ("written", "alphabet"),
    [("T AH0 Q", Alphabet.CMU_ARPABET), ("", Alphabet.IPA), ("t3st", Alphabet.IPA)],
)
def test_phonemes_not_of_their_alphabet_are_refused_by_name(
    written: str, alphabet: Alphabet
) -> None:
    with pytest.raises(InvalidPhonemes):
        ipa_of(written, alphabet)


def test_word_times_follow_the_words_as_written() -> None:
    lexicon = Lexicon([Rule("VS", alias="Voice Service")])
    heard: list[str] = []

    def say(text: str) -> Pcm:
        heard.append(text)
        # One second per spoken word, as an engine reports them.
        words = text.split()
        times = tuple((float(i), i + 1.0) for i in range(len(words)))
        return Pcm(np.zeros(len(words) * 100, dtype=np.int16), 100, times)

    pcm = pronounced(say, lexicon)("Welcome to VS today")
    assert heard == ["Welcome to Voice Service today"]
    assert pcm.word_times == ((0.0, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 5.0))


def test_three_dictionaries_of_a_thousand_rules_each_say_their_own_words() -> None:
    rules = [Rule(f"term{n}x{d}", alias=f"alias {d} {n}") for d in range(3) for n in range(1000)]
    text = " ".join(f"word term{n}x{n % 3}" for n in range(100))
    said = Lexicon(rules).rewrite(text).spoken
    assert said == " ".join(f"word alias {n % 3} {n}" for n in range(100))
