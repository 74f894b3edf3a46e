"""Pronunciation rules on every engine and for clones, heard back by the node's Whisper: an
alias is heard as the alias, a phoneme rule (CMU Arpabet, or IPA) as its phonemes."""

from __future__ import annotations

import pytest

from tests.helpers.inference import heard
from tests.helpers.voices import JOE_KEY
from voice_service.engines.pronunciation import NO_LEXICON, Alphabet, Lexicon, Rule, ipa_of
from voice_service.inference.engines import Engines

TEXT = "Please ask Bob to call VS today."
VOICES = [JOE_KEY, "kokoro:jm_kumo:en", "espeak:en-us"]


@pytest.mark.parametrize("voice", VOICES)
@pytest.mark.parametrize("alphabet", [Alphabet.CMU_ARPABET, Alphabet.IPA])
def test_an_alias_and_a_phoneme_rule_are_heard_as_they_say(
    engines: Engines, voice: str, alphabet: Alphabet
) -> None:
    tom = "T AA1 M" if alphabet is Alphabet.CMU_ARPABET else "/ˈtɑːm/"
    lexicon = Lexicon(
        [Rule("Bob", phonemes=ipa_of(tom, alphabet)), Rule("VS", alias="Voice Service")]
    )
    plain = heard(engines, engines.chunk_speaker(voice, None, 1.0, NO_LEXICON)(TEXT), "en").lower()
    ruled = engines.chunk_speaker(voice, None, 1.0, lexicon)(TEXT)

    assert "voice service" not in plain
    said = heard(engines, ruled, "en").lower()
    assert "tom" in said and "bob" not in said and "voice service" in said
    if ruled.word_times:  # one time per word as written
        assert len(ruled.word_times) == len(TEXT.split())
