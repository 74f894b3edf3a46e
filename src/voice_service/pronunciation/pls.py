"""W3C Pronunciation Lexicon Specification (PLS 1.0) files, read and written.

Read as untrusted XML (`engines.untrusted_xml`: no DTD, no entities). Only the lexicon's own
shape is walked (lexicon > lexeme > grapheme, phoneme, alias), so depth costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.etree.ElementTree import Element, SubElement, tostring

from voice_service.engines import untrusted_xml
from voice_service.engines.pronunciation import ALPHABET_NAMES
from voice_service.engines.untrusted_xml import UnreadableXml, local_name
from voice_service.pronunciation.rules import StoredRule

MEDIA_TYPE = "application/pls+xml"
NAMESPACE = "http://www.w3.org/2005/01/pronunciation-lexicon"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# PLS names Arpabet "x-cmu" in ElevenLabs' files; either spelling is read.


class InvalidLexicon(ValueError):
    """The file is not a PLS lexicon this service reads; the message says where."""


@dataclass(frozen=True, slots=True)
class Lexicon:
    rules: list[StoredRule]
    language: str | None


def read(document: bytes, max_rules: int) -> Lexicon:
    """The rules of a PLS `document`, in its order: each grapheme of a lexeme is said as
    the lexeme's first alias or phoneme (PLS's own rule: the first pronunciation)."""
    try:
        root = untrusted_xml.parse(document)
    except UnreadableXml as error:
        raise InvalidLexicon(f"the file {error}") from None
    if local_name(root.tag) != "lexicon":
        raise InvalidLexicon(f"the root element is <{local_name(root.tag)}>, not <lexicon>")
    default_alphabet = _alphabet(root.get("alphabet", "ipa"))
    rules: list[StoredRule] = []
    for number, lexeme in enumerate(root, start=1):
        if local_name(lexeme.tag) != "lexeme":
            continue  # <meta>, <metadata>: nothing to say
        graphemes = [_text(child) for child in lexeme if local_name(child.tag) == "grapheme"]
        said = next(
            (child for child in lexeme if local_name(child.tag) in ("phoneme", "alias")), None
        )
        if not any(graphemes) or said is None:
            raise InvalidLexicon(f"lexeme {number} needs a <grapheme> and a <phoneme> or <alias>")
        for grapheme in filter(None, graphemes):
            if local_name(said.tag) == "alias":
                rules.append({"type": "alias", "string_to_replace": grapheme, "alias": _text(said)})
            else:
                named = said.get("alphabet")
                rules.append(
                    {
                        "type": "phoneme",
                        "string_to_replace": grapheme,
                        "phoneme": _text(said),
                        "alphabet": _alphabet(named) if named else default_alphabet,
                    }
                )
            if len(rules) > max_rules:
                raise InvalidLexicon(f"a dictionary holds at most {max_rules} rules")
    return Lexicon(rules, root.get(_XML_LANG))


def write(rules: list[StoredRule], language: str | None) -> bytes:
    """`rules` as a PLS document (the download of a dictionary's version)."""
    root = Element("lexicon", {"version": "1.0", "xmlns": NAMESPACE, "alphabet": "ipa"})
    root.set("xml:lang", language or "en-US")
    for rule in rules:
        lexeme = SubElement(root, "lexeme")
        SubElement(lexeme, "grapheme").text = rule["string_to_replace"]
        if rule["type"] == "alias":
            SubElement(lexeme, "alias").text = rule["alias"]
        else:
            said = SubElement(lexeme, "phoneme", {"alphabet": _pls_alphabet(rule["alphabet"])})
            said.text = rule["phoneme"]
    body: bytes = tostring(root, encoding="utf-8", xml_declaration=True)
    return body


def _text(element: Element) -> str:
    return " ".join((element.text or "").split())


def _alphabet(name: str) -> str:
    alphabet = ALPHABET_NAMES.get(name.strip().lower())
    if alphabet is None:
        raise InvalidLexicon(f"alphabet {name!r} is not one of {', '.join(ALPHABET_NAMES)}")
    return alphabet.value


def _pls_alphabet(alphabet: str) -> str:
    return "x-cmu" if alphabet == "cmu-arpabet" else "ipa"
