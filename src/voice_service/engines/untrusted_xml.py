"""XML a customer sent (an SSML text, a PLS file), read with defusedxml: a document with a
DTD, an entity or an external reference is refused before anything is expanded (billion
laughs, external entities)."""

from __future__ import annotations

from xml.etree.ElementTree import Element

import defusedxml.ElementTree
from defusedxml import DefusedXmlException


class UnreadableXml(ValueError):
    """Not well-formed, or declaring what this service never reads; the message (to follow
    "the file", "the text") says which."""


def parse(document: bytes) -> Element:
    try:
        root: Element = defusedxml.ElementTree.fromstring(document, forbid_dtd=True)
    except DefusedXmlException as error:
        raise UnreadableXml(f"holds XML this service refuses ({error})") from None
    except SyntaxError as error:  # ParseError
        raise UnreadableXml(f"is not well-formed XML ({error})") from None
    return root


def local_name(tag: object) -> str:
    """An element's name without its namespace ("" for a comment or processing
    instruction)."""
    return str(tag).rsplit("}", 1)[-1] if isinstance(tag, str) else ""
