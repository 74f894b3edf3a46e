"""Split text into pieces a TTS engine synthesizes well, one after another.

Neural voices synthesize a sentence in one piece, and their memory grows with the length of
the audio (Piper: about 19 MB per second of speech, so one unpunctuated 5,000-character
"sentence" needed over 6 GB). Speaking text in bounded pieces bounds memory per request and
lets audio flow piece by piece. Pieces end where a reader would pause: at a sentence end,
then a clause mark, then a word boundary once a piece is long, and only a run with no
spaces at all is cut hard.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from voice_service.engines.protocols import PHONEMES_CLOSE, PHONEMES_OPEN

# About eight seconds of speech: most sentences stay whole, and few chunks need the phoneme
# cap of Piper (which would cut them at a word rather than where the text pauses).
MAX_CHUNK_CHARS = 120
# A stream's first piece: about a second of speech, made in a fraction of that, so that
# audio starts at once; the rest of its sentence is made while it plays. The cut is at a
# clause mark if there is one early enough, else between words.
FIRST_CHUNK_CHARS = 24

# A sentence ends after terminal punctuation (and closing quotes or brackets) followed by
# space; CJK full stops (\u3002, fullwidth ! and ?) need no space. A line break ends one too.
_TERMINAL = ".!?\u2026"  # ... and the ellipsis
_CLOSING = "\"')\\]\u201d\u2019"  # quotes and brackets after a full stop
_CJK_TERMINAL = "\u3002\uff01\uff1f"
_SENTENCE_END = re.compile(
    rf"(?<=[{_TERMINAL}][{_CLOSING}])\s+|(?<=[{_TERMINAL}])\s+|(?<=[{_CJK_TERMINAL}])|\n+"
)
# Commas, semicolons and colons (ASCII, fullwidth, ideographic), or a spaced dash.
_CLAUSE_END = re.compile(r"(?<=[,;:\uff0c\uff1b\uff1a\u3001])\s*|\s+(?=[\u2014\u2013]\s)")
_SPACE = re.compile(r"\s+")
_PHONEME_MARKS = frozenset((PHONEMES_OPEN, PHONEMES_CLOSE))


def split_text(
    text: str, max_chars: int = MAX_CHUNK_CHARS, first_chars: int | None = None
) -> list[str]:
    """The pieces of `text` to speak in order; none longer than `max_chars`, none blank;
    the first no longer than `first_chars` when given (a stream's quick start)."""
    chunks = [
        chunk for sentence in _sentences(speakable(text)) for chunk in _fit(sentence, max_chars)
    ]
    if first_chars is None or not chunks or len(chunks[0]) <= first_chars:
        return chunks
    head = next(_fit(chunks[0], first_chars))
    rest = chunks[0][len(head) :]  # _fit's pieces are stripped prefixes, in order
    return [head, *_non_blank(rest), *chunks[1:]]


def ends_sentence(text: str) -> bool:
    """`text` ends where a sentence does (terminal punctuation, closing quotes after it)."""
    end = text.rstrip().rstrip(_CLOSING)
    return end.endswith(tuple(_TERMINAL + _CJK_TERMINAL))


def speakable(text: str) -> str:
    """`text` with control characters (NUL, escapes, …) as spaces: engines either choke on
    them (Piper: "embedded null character") or read them out as noise. So are the marks of
    phonemes (`protocols.PHONEMES_OPEN`): only a pronunciation rule writes phonemes."""
    return "".join(
        " "
        if (unicodedata.category(char) == "Cc" and char != "\n") or char in _PHONEME_MARKS
        else char
        for char in text
    )


def _sentences(text: str) -> Iterator[str]:
    start = 0
    for match in _SENTENCE_END.finditer(text):
        following = text[match.end() : match.end() + 1]
        # "e.g. this" or "3.5 m" is not a sentence end; a capital, digit or quote after it is.
        if match.group() and not match.group().startswith("\n") and following.islower():
            continue
        yield from _non_blank(text[start : match.start()])
        start = match.end()
    yield from _non_blank(text[start:])


def _fit(sentence: str, max_chars: int) -> Iterator[str]:
    if len(sentence) <= max_chars:
        yield sentence
        return
    for clause in _pack(_split_after(_CLAUSE_END, sentence), max_chars):
        if len(clause) <= max_chars:
            yield clause
            continue
        for words in _pack(_split_after(_SPACE, clause), max_chars):
            yield from _hard_cut(words, max_chars)


def _split_after(pattern: re.Pattern[str], text: str) -> list[str]:
    """`text` cut at each match of `pattern`, the separator kept with the piece before it."""
    pieces, start = [], 0
    for match in pattern.finditer(text):
        if match.end() > start:
            pieces.append(text[start : match.end()])
            start = match.end()
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def _pack(pieces: list[str], max_chars: int) -> Iterator[str]:
    """Join consecutive pieces while they fit, so a list of short clauses is not choppy."""
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece) > max_chars:
            yield from _non_blank(current)
            current = ""
        current += piece
    yield from _non_blank(current)


def _hard_cut(text: str, max_chars: int) -> Iterator[str]:
    for start in range(0, len(text), max_chars):
        yield from _non_blank(text[start : start + max_chars])


def _non_blank(text: str) -> Iterator[str]:
    stripped = text.strip()
    if stripped:
        yield stripped
