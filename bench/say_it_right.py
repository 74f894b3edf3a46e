"""Figure 21: what pronunciation dictionaries and SSML add to a speech request's time.

Three dictionaries of 1,000 rules each (the most a request names, each a realistic size)
rewrite a 1,000-character text, as every chunk of a request is rewritten before an engine
says it. Without dictionaries nothing is rewritten, so all of it is added time. The lexicon
itself is compiled once per set of versions and kept (`pronunciation.service`), so its build
is reported beside, not added. An SSML document of the same length, every element this
service takes in it, is read into its script as each request's is."""

from __future__ import annotations

import statistics
import time
from typing import Any

from voice_service.engines import ssml
from voice_service.engines.chunking import split_text
from voice_service.engines.pronunciation import Lexicon, Rule
from voice_service.pronunciation.rules import MAX_RULES as RULES_PER_DICTIONARY

DICTIONARIES = 3
RULES_EACH = 1_000
TEXT_CHARS = 1_000


def _rules() -> list[Rule]:
    """Aliases and phonemes for made-up product names, some of them in the text."""
    rules = []
    for dictionary in range(DICTIONARIES):
        for n in range(RULES_EACH):
            name = f"Product{dictionary}x{n}"
            if n % 2:
                rules.append(Rule(name, alias=f"product {n} of line {dictionary}"))
            else:
                rules.append(Rule(name, phonemes="pɹˈɑːdʌkt", case_sensitive=False))
    return rules


def _text() -> str:
    words: list[str] = []
    n = 0
    while len(" ".join(words)) < TEXT_CHARS:
        words += ["Order", "the", f"Product{n % DICTIONARIES}x{n * 37 % RULES_EACH}", "today."]
        n += 1
    return " ".join(words)[:TEXT_CHARS]


def _rewrite_ms(lexicon: Lexicon, chunks: list[str]) -> float:
    started = time.perf_counter()
    for chunk in chunks:
        lexicon.rewrite(chunk)
    return (time.perf_counter() - started) * 1000


def _worst_rules() -> list[Rule]:
    """Rules of every length up to 200 characters that match inside words too: at every
    place of a text they do not match, each length is tried."""
    return [
        Rule("a " * (n % 100) + "a" * (1 + n % 2), alias="b", word_boundaries=False)
        for n in range(3 * RULES_PER_DICTIONARY)
    ]


def _document() -> str:
    sentence = (
        "<s>Call <say-as interpret-as='telephone'>555-0134</say-as> about "
        "<sub alias='World Wide Web'>WWW</sub> on <say-as interpret-as='date' format='ymd'>"
        "2024-03-05</say-as>,<break time='300ms'/> <prosody rate='fast'>said "
        "<phoneme alphabet='ipa' ph='ˈkuːbərˌneɪtiːz'>Kubernetes</phoneme></prosody>.</s>"
    )
    body = ""
    while len(ssml.parse(f"<speak>{body}{sentence}</speak>", "en").written) <= TEXT_CHARS:
        body += sentence
    return f"<speak><p>{body}</p></speak>"


def _parse_ms(document: str) -> float:
    started = time.perf_counter()
    ssml.parse(document, "en")
    return (time.perf_counter() - started) * 1000


def measure(quick: bool) -> dict[str, Any]:
    rules = _rules()
    started = time.perf_counter()
    lexicon = Lexicon(rules)
    build_ms = (time.perf_counter() - started) * 1000
    chunks = split_text(_text())
    repeats = 20 if quick else 200
    timed = [_rewrite_ms(lexicon, chunks) for _ in range(repeats)]
    replaced = sum(len(lexicon.rewrite(chunk).spans) for chunk in chunks)
    worst = Lexicon(_worst_rules())
    worst_chunks = split_text("b " * (TEXT_CHARS // 2))
    worst_ms = statistics.median(_rewrite_ms(worst, worst_chunks) for _ in range(3))
    document = _document()
    return {
        "ssml_parse_ms": statistics.median(_parse_ms(document) for _ in range(repeats)),
        "ssml_characters": len(ssml.parse(document, "en").written),
        "worst_ms": worst_ms,
        "added_ms": statistics.median(timed),
        "build_ms": build_ms,
        "rules": len(rules),
        "characters": sum(len(chunk) for chunk in chunks),
        "replaced": replaced,
        "repeats": repeats,
    }
