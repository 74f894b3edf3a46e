"""W3C Pronunciation Lexicon Specification (PLS 1.0) files, read and written.

Read with defusedxml: a document with a DTD, an entity or an external reference is refused
before anything is expanded (billion laughs, external entities). Only the lexicon's own shape
is walked (lexicon > lexeme > grapheme, phoneme, alias), so depth costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.etree.ElementTree import Element, SubElement, tostring

import defusedxml.ElementTree
from defusedxml import DefusedXmlException

from voice_service.pronunciation.rules import ALPHABETS, StoredRule

MEDIA_TYPE = "application/pls+xml"
NAMESPACE = "http://www.w3.org/2005/01/pronunciation-lexicon"
_NS = "{" + NAMESPACE + "}"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
# PLS names Arpabet "x-cmu" in ElevenLabs' files; either spelling is read.
_ALPHABET_NAMES = {"ipa": "ipa", "x-cmu": "cmu-arpabet", "cmu-arpabet": "cmu-arpabet"}


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
        root = defusedxml.ElementTree.fromstring(document, forbid_dtd=True)
    except DefusedXmlException as error:
        raise InvalidLexicon(f"the file holds XML this service refuses ({error})") from None
    except SyntaxError as error:  # ParseError
        raise InvalidLexicon(f"the file is not well-formed XML ({error})") from None
    if _local(root.tag) != "lexicon":
        raise InvalidLexicon(f"the root element is <{_local(root.tag)}>, not <lexicon>")
    default_alphabet = _alphabet(root.get("alphabet", "ipa"))
    rules: list[StoredRule] = []
    for number, lexeme in enumerate(root, start=1):
        if _local(lexeme.tag) != "lexeme":
            continue  # <meta>, <metadata>: nothing to say
        graphemes = [_text(child) for child in lexeme if _local(child.tag) == "grapheme"]
        said = next((child for child in lexeme if _local(child.tag) in ("phoneme", "alias")), None)
        if not any(graphemes) or said is None:
            raise InvalidLexicon(f"lexeme {number} needs a <grapheme> and a <phoneme> or <alias>")
        for grapheme in filter(None, graphemes):
            if _local(said.tag) == "alias":
                rules.append({"type": "alias", "string_to_replace": grapheme, "alias": _text(said)})
            else:
                alphabet = _alphabet(said.get("alphabet")) if said.get("alphabet") else None
                rules.append(
                    {
                        "type": "phoneme",
                        "string_to_replace": grapheme,
                        "phoneme": _text(said),
                        "alphabet": alphabet or default_alphabet,
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


def _local(tag: object) -> str:
    return str(tag).removeprefix(_NS) if isinstance(tag, str) else ""


def _text(element: Element) -> str:
    return " ".join((element.text or "").split())


def _alphabet(name: str) -> str:
    alphabet = _ALPHABET_NAMES.get(name.strip().lower())
    if alphabet is None or alphabet not in ALPHABETS:
        raise InvalidLexicon(f"alphabet {name!r} is not one of ipa, x-cmu, cmu-arpabet")
    return alphabet


def _pls_alphabet(alphabet: str) -> str:
    return "x-cmu" if alphabet == "cmu-arpabet" else "ipa"
