"""PLS lexicons read and written, and the documents an attacker sends refused before they
expand."""

from __future__ import annotations

import pytest

from voice_service.pronunciation import pls
from voice_service.pronunciation.rules import MAX_RULES

LEXICON = b"""<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon"
         alphabet="ipa" xml:lang="en-US">
  <lexeme><grapheme>tomato</grapheme><grapheme>Tomato</grapheme>
    <phoneme>t\xc9\x99\xcb\x88m\xc9\x91\xcb\x90to\xca\x8a</phoneme></lexeme>
  <lexeme><grapheme>nginx</grapheme><alias>engine x</alias></lexeme>
  <lexeme><grapheme>Bob</grapheme><phoneme alphabet="x-cmu">T AA1 M</phoneme></lexeme>
</lexicon>"""


def test_a_lexicons_graphemes_are_each_a_rule_in_its_order() -> None:
    read = pls.read(LEXICON, MAX_RULES)
    assert read.language == "en-US"
    assert read.rules == [
        {
            "type": "phoneme",
            "string_to_replace": "tomato",
            "phoneme": "təˈmɑːtoʊ",
            "alphabet": "ipa",
        },
        {
            "type": "phoneme",
            "string_to_replace": "Tomato",
            "phoneme": "təˈmɑːtoʊ",
            "alphabet": "ipa",
        },
        {"type": "alias", "string_to_replace": "nginx", "alias": "engine x"},
        {
            "type": "phoneme",
            "string_to_replace": "Bob",
            "phoneme": "T AA1 M",
            "alphabet": "cmu-arpabet",
        },
    ]


def test_what_is_written_reads_back_the_same() -> None:
    read = pls.read(LEXICON, MAX_RULES)
    again = pls.read(pls.write(read.rules, read.language), MAX_RULES)
    assert again == read


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lexicon [
  <!ENTITY a "lol">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
  <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
]>
<lexicon version="1.0"><lexeme><grapheme>x</grapheme><alias>&d;</alias></lexeme></lexicon>"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE lexicon [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<lexicon version="1.0"><lexeme><grapheme>x</grapheme><alias>&secret;</alias></lexeme></lexicon>"""
DEEP = b"<lexicon>" + b"<lexeme>" * 10_000 + b"</lexeme>" * 10_000 + b"</lexicon>"


@pytest.mark.parametrize(
    ("document", "says"),
    [
        (BILLION_LAUGHS, "refuses"),
        (EXTERNAL, "refuses"),
        (DEEP, "lexeme 1 needs"),
        (b"<lexicon><lexeme>", "not well-formed"),
        (b"<speak>hello</speak>", "not <lexicon>"),
        (
            b'<lexicon alphabet="x-sampa"><lexeme><grapheme>a</grapheme>'
            b"<phoneme>a</phoneme></lexeme></lexicon>",
            "x-sampa",
        ),
    ],
)
def test_documents_that_are_not_lexicons_are_refused(document: bytes, says: str) -> None:
    with pytest.raises(pls.InvalidLexicon, match=says):
        pls.read(document, MAX_RULES)


def test_a_lexicon_of_more_rules_than_a_dictionary_holds_is_refused() -> None:
    lexeme = b"<lexeme><grapheme>w</grapheme><alias>v</alias></lexeme>"
    document = b"<lexicon>" + lexeme * 100_000 + b"</lexicon>"
    with pytest.raises(pls.InvalidLexicon, match=f"at most {MAX_RULES} rules"):
        pls.read(document, MAX_RULES)
