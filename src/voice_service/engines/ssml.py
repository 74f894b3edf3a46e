"""SSML: a text that starts with `<speak>` says how it is said, element by element.

Read as untrusted XML (`untrusted_xml`: no DTD, no entities) and walked to a bounded depth.
A document becomes a `Script`: stretches of text, each with what the engine reads for it (a
`Rewrite`: `<sub>` aliases, `<say-as>` readings and `<phoneme>`s, which every engine reads
as phonemes), its rate (`<prosody rate>`) and the silence after it (`<break>`, the end of a
`<p>`). What the customer wrote (the text without its tags) is what is billed and timed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

from voice_service.engines import untrusted_xml
from voice_service.engines.pronunciation import (
    ALPHABET_NAMES,
    InvalidPhonemes,
    Rewrite,
    ipa_of,
)
from voice_service.engines.protocols import PHONEMES_CLOSE, PHONEMES_OPEN
from voice_service.engines.untrusted_xml import UnreadableXml, local_name

MAX_DEPTH = 32
MAX_BREAK_SECONDS = 10.0  # Amazon Polly's and Google's bound
SUPPORTED = "speak, p, s, break, phoneme, sub, say-as, prosody (rate)"
SAY_AS = ("characters", "spell-out", "cardinal", "ordinal", "digits", "date", "time", "telephone")

_STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.1,
    "weak": 0.25,
    "medium": 0.4,
    "strong": 0.7,
    "x-strong": 1.0,
}
_RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "fast": 1.25, "x-fast": 1.5}
_PARAGRAPH_PAUSE = 0.5
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class InvalidSsml(ValueError):
    """The document is not SSML this service says; the message names the element."""


def is_ssml(text: str) -> bool:
    """`text` starts with `<speak`, or with an XML declaration or doctype (refused if it
    declares anything)."""
    return text.lstrip().startswith(("<speak", "<?xml", "<!DOCTYPE"))


@dataclass(frozen=True, slots=True)
class Stretch:
    rewrite: Rewrite  # its text as written, and as the engine reads it
    rate: float = 1.0  # times the request's speed
    pause: float = 0.0  # seconds of silence after it


@dataclass(frozen=True, slots=True)
class Script:
    stretches: tuple[Stretch, ...]

    @classmethod
    def plain(cls, text: str) -> Script:
        """Text that is not SSML: one stretch, read as written."""
        return cls((Stretch(Rewrite.unchanged(text)),))

    @property
    def written(self) -> str:
        """The text without its tags: billed, and timed by the alignment."""
        return "".join(stretch.rewrite.written for stretch in self.stretches)


def parse(document: str, language: str | None) -> Script:
    """The script of an SSML `document` for a voice of `language` (say-as readings)."""
    try:
        root = untrusted_xml.parse(document.encode())
    except UnreadableXml as error:
        raise InvalidSsml(f"the text {error}") from None
    if local_name(root.tag) != "speak":
        raise InvalidSsml(f"the root element is <{local_name(root.tag)}>, not <speak>")
    builder = _Builder((language or "en").split("-")[0].lower())
    builder.walk(root, depth=0, rate=1.0)
    return Script(tuple(builder.finished()))


@dataclass
class _Piece:
    written: str
    spoken: str | None = None  # None: said as written


@dataclass
class _Builder:
    language: str
    _pieces: list[_Piece] = field(default_factory=list)
    _rate: float = 1.0
    _stretches: list[Stretch] = field(default_factory=list)

    def walk(self, element: Element, depth: int, rate: float) -> None:
        if depth > MAX_DEPTH:
            raise InvalidSsml(f"elements are nested more than {MAX_DEPTH} deep")
        name = local_name(element.tag)
        if name in ("speak", "p", "s"):
            self._text(element.text, rate)
            for child in element:
                self.walk(child, depth + 1, rate)
                self._text(child.tail, rate)
            if name != "speak":
                self._end(_PARAGRAPH_PAUSE if name == "p" else 0.0)
        elif name == "prosody":
            inner = rate * _rate_of(element)
            self._text(element.text, inner)
            for child in element:
                self.walk(child, depth + 1, inner)
                self._text(child.tail, inner)
        elif name == "break":
            self._end(_break_seconds(element))
        elif name in ("sub", "phoneme", "say-as"):
            if len(element):
                raise InvalidSsml(f"<{name}> holds only text, not <{local_name(element[0].tag)}>")
            written = _collapsed(element.text or "")
            self._said(written, _said_as(name, element, written, self.language), rate)
        else:
            raise InvalidSsml(f"<{name}> is not supported; supported: {SUPPORTED}")

    def _text(self, text: str | None, rate: float) -> None:
        if text:
            self._said(_collapsed(text), None, rate)

    def _said(self, written: str, spoken: str | None, rate: float) -> None:
        if rate != self._rate and self._pieces:
            self._end(0.0)
        self._rate = rate
        self._pieces.append(_Piece(written, spoken))

    def _end(self, pause: float) -> None:
        """The stretch so far ends, with `pause` after it (a stretch of nothing but a pause
        adds it to the one before)."""
        if not any(piece.written.strip() for piece in self._pieces) and self._stretches:
            last = self._stretches[-1]
            written = last.rewrite.written + "".join(piece.written for piece in self._pieces)
            rewrite = Rewrite(written, last.rewrite.spoken, last.rewrite.spans)
            self._stretches[-1] = Stretch(rewrite, last.rate, last.pause + pause)
        else:
            self._stretches.append(Stretch(_rewrite(self._pieces), self._rate, pause))
        self._pieces = []

    def finished(self) -> list[Stretch]:
        if self._pieces:
            self._end(0.0)
        return self._stretches


def _rewrite(pieces: list[_Piece]) -> Rewrite:
    written: list[str] = []
    spoken: list[str] = []
    spans = []
    at = said = 0
    for piece in pieces:
        text = piece.spoken if piece.spoken is not None else piece.written
        if piece.spoken is not None:
            spans.append((at, at + len(piece.written), said, said + len(text)))
        written.append(piece.written)
        spoken.append(text)
        at += len(piece.written)
        said += len(text)
    return Rewrite("".join(written), "".join(spoken), tuple(spans))


def _said_as(name: str, element: Element, written: str, language: str) -> str:
    """What the engine reads for a `<sub>`, `<phoneme>` or `<say-as>` holding `written`."""
    if name == "sub":
        alias = element.get("alias")
        if alias is None:
            raise InvalidSsml("<sub> needs an alias")
        return f" {alias} "
    if name == "phoneme":
        alphabet = ALPHABET_NAMES.get((element.get("alphabet") or "ipa").lower())
        if alphabet is None:
            raise InvalidSsml(f"<phoneme alphabet> is one of {', '.join(ALPHABET_NAMES)}")
        try:
            phonemes = ipa_of(element.get("ph") or "", alphabet)
        except InvalidPhonemes as error:
            raise InvalidSsml(f"<phoneme ph>: {error}") from None
        return f" {PHONEMES_OPEN}{phonemes}{PHONEMES_CLOSE} "
    kind = (element.get("interpret-as") or "").lower()
    if kind not in SAY_AS:
        raise InvalidSsml(f"<say-as interpret-as> is one of {', '.join(SAY_AS)}")
    return f" {read_as(kind, written, language, element.get('format'))} "


def read_as(kind: str, text: str, language: str, form: str | None = None) -> str:
    """`text` written so that a voice of `language` reads it as `kind` says."""
    if kind in ("characters", "spell-out"):
        return " ".join(char for char in text if not char.isspace())
    if kind in ("digits", "telephone"):
        # Each digit a clause of its own: the voices then say each apart, never as one
        # number ("five hundred and fifty-five"), and Whisper hears them so.
        return ", ".join(re.findall(r"\d|\+", text))
    if kind == "cardinal":
        return re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)", "", text.strip())
    if kind == "ordinal":
        return _ordinal(text.strip(), language)
    if kind == "date":
        return _date(text.strip(), language, form or "ymd")
    return text.strip()  # time: the voices read "14:30" as a time


def _ordinal(number: str, language: str) -> str:
    if not number.isdigit():
        raise InvalidSsml(f'<say-as interpret-as="ordinal"> holds a number, not {number!r}')
    if language == "en":
        value = int(number)
        suffix = (
            "th" if 10 <= value % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")
        )
        return number + suffix
    if language == "fr":
        return number + ("er" if number == "1" else "e")
    return number + "º" if language in ("es", "it", "pt") else number + "."


_MONTHS = {
    "en": "January February March April May June July August September October November December",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre "
    "diciembre",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre "
    "novembre dicembre",
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro "
    "dezembro",
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember",
}


def _date(text: str, language: str, form: str) -> str:
    parts = re.findall(r"\d+", text)
    order = form.lower()
    if len(parts) != len(order) or set(order) - set("ymd") or not parts:
        raise InvalidSsml(f'<say-as interpret-as="date" format="{form}"> does not fit {text!r}')
    found = dict(zip(order, (int(part) for part in parts), strict=True))
    month = found.get("m")
    if month is not None and not 1 <= month <= 12:
        raise InvalidSsml(f"{text!r} has no month {month}")
    names = _MONTHS.get(language, _MONTHS["en"]).split()
    said_month = names[month - 1] if month else ""
    day, year = found.get("d"), found.get("y")
    if language == "en":
        pieces = [said_month, f"{day}," if day and year else str(day or ""), str(year or "")]
    elif language in ("es", "pt"):
        pieces = [str(day or ""), "de" if day and month else "", said_month]
        pieces += ["de", str(year)] if year else []
    else:
        pieces = [str(day or ""), said_month, str(year or "")]
    return " ".join(piece for piece in pieces if piece)


def _rate_of(element: Element) -> float:
    unsupported = set(element.attrib) - {"rate"}
    if unsupported:
        raise InvalidSsml(f"<prosody> takes rate only, not {', '.join(sorted(unsupported))}")
    rate = (element.get("rate") or "medium").strip().lower()
    if rate in _RATES:
        return _RATES[rate]
    percent = _PERCENT.match(rate)
    if percent is None or not 20 <= float(percent[1]) <= 400:
        raise InvalidSsml(f"<prosody rate> is x-slow to x-fast, or 20% to 400%: not {rate!r}")
    return float(percent[1]) / 100


def _break_seconds(element: Element) -> float:
    if element.get("time") is not None:
        found = _TIME.match(element.get("time") or "")
        if found is None:
            raise InvalidSsml(
                f'<break time> is like "700ms" or "1.5s": not {element.get("time")!r}'
            )
        seconds = float(found[1]) / (1000 if found[2] == "ms" else 1)
        if seconds > MAX_BREAK_SECONDS:
            raise InvalidSsml(f"<break time> is at most {MAX_BREAK_SECONDS:g} s")
        return seconds
    strength = (element.get("strength") or "medium").lower()
    if strength not in _STRENGTHS:
        raise InvalidSsml(f"<break strength> is one of {', '.join(_STRENGTHS)}")
    return _STRENGTHS[strength]


def _collapsed(text: str) -> str:
    """XML's whitespace: a run of it is one space."""
    return re.sub(r"\s+", " ", text)
