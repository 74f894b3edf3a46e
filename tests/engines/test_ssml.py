"""SSML read into a script: what is said, as what, at which rate, with which pauses; and the
documents this service refuses, by name."""

from __future__ import annotations

import pytest

from voice_service.engines.protocols import PHONEMES_CLOSE, PHONEMES_OPEN
from voice_service.engines.ssml import InvalidSsml, Script, is_ssml, parse, read_as


def said(script: Script) -> list[tuple[str, str, float, float]]:
    return [
        (s.rewrite.written, " ".join(s.rewrite.spoken.split()), s.rate, s.pause)
        for s in script.stretches
    ]


def test_breaks_rates_and_paragraphs_divide_the_text_into_stretches() -> None:
    script = parse(
        "<speak>One.<break time='700ms'/> <prosody rate='150%'>Two.</prosody>"
        "<p>Three.</p><break strength='strong'/></speak>",
        "en-US",
    )
    assert said(script) == [
        ("One. ", "One.", 1.0, 0.7),
        ("Two.", "Two.", 1.5, 0.0),
        ("Three.", "Three.", 1.0, 0.5 + 0.7),
    ]
    assert script.written == "One. Two.Three."  # billed and timed: the text without tags


def test_sub_phoneme_and_say_as_are_read_as_they_say_and_written_as_written() -> None:
    script = parse(
        "<speak>Call <say-as interpret-as='telephone'>555-0134</say-as> about "
        "<sub alias='World Wide Web'>WWW</sub>, <phoneme alphabet='x-cmu' ph='T AA1 M'>Bob"
        "</phoneme>.</speak>",
        "en",
    )
    (stretch,) = script.stretches
    assert stretch.rewrite.written == "Call 555-0134 about WWW, Bob."
    assert " ".join(stretch.rewrite.spoken.split()) == (
        f"Call 5, 5, 5, 0, 1, 3, 4 about World Wide Web , {PHONEMES_OPEN}tˈɑːm{PHONEMES_CLOSE} ."
    )


@pytest.mark.parametrize(
    ("kind", "text", "language", "form", "read"),
    [
        ("characters", "NASA", "en", None, "N A S A"),
        ("digits", "2024", "fr", None, "2, 0, 2, 4"),
        ("cardinal", "12,345", "en", None, "12345"),
        ("ordinal", "22", "en", None, "22nd"),
        ("ordinal", "13", "en", None, "13th"),
        ("ordinal", "1", "fr", None, "1er"),
        ("ordinal", "3", "es", None, "3º"),
        ("date", "2024-03-05", "en", "ymd", "March 5, 2024"),
        ("date", "05/03/2024", "es", "dmy", "5 de marzo de 2024"),
        ("date", "05/03/2024", "fr", "dmy", "5 mars 2024"),
        ("telephone", "+1 555-0134", "en", None, "+, 1, 5, 5, 5, 0, 1, 3, 4"),
    ],
)
def test_say_as_writes_what_the_voices_read_as_it_says(
    kind: str, text: str, language: str, form: str | None, read: str
) -> None:
    assert read_as(kind, text, language, form) == read


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("<speak><audio src='x.mp3'/></speak>", "<audio> is not supported; supported: speak"),
        ("<speak><prosody pitch='high'>a</prosody></speak>", "takes rate only, not pitch"),
        ("<speak><break time='11s'/>a</speak>", "at most 10 s"),
        ("<speak><say-as interpret-as='currency'>1</say-as></speak>", "interpret-as> is one"),
        ("<speak><phoneme alphabet='x-sampa' ph='a'>a</phoneme></speak>", "alphabet> is one"),
        ("<speak><sub>a</sub></speak>", "needs an alias"),
        ("<speak>a <b>", "not well-formed"),
        ("<speak>" + "<s>" * 100 + "a" + "</s>" * 100 + "</speak>", "more than 32 deep"),
        (
            '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY a "lol">]><speak>&a;</speak>',
            "refuses",
        ),
        (
            '<!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>',
            "refuses",
        ),
    ],
)
def test_documents_this_service_cannot_say_are_refused_by_name(document: str, says: str) -> None:
    with pytest.raises(InvalidSsml, match=says):
        parse(document, "en")


def test_only_a_text_that_starts_with_speak_is_ssml() -> None:
    assert is_ssml("  <speak>Hello</speak>")
    assert is_ssml('<?xml version="1.0"?><speak>Hello</speak>')
    assert not is_ssml("I <3 tags: <speak>")
