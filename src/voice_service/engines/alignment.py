"""When each character of a text is spoken, as ElevenLabs' `alignment` reports it.

Engines tell when each word was spoken as their phonemizer split the text (`Pcm.word_times`),
which is not always as the text splits it: espeak-ng reads "2024" as three words and joins
French words it links ("est un"). Text words are matched to spoken words by a small
alignment of their lengths (one to one, or up to three to three where the counts differ);
a group's span is shared by its words in proportion to their letters, and a word's span by
its characters. Spaces last from the end of one word to the start of the next. With no word
times at all, the text is spread over the audio evenly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from voice_service.engines.chunking import speakable
from voice_service.engines.protocols import Pcm, WordTime

_WORD = re.compile(r"\S+")
# The most words on either side of one match (a number read as three words, three words
# said as one).
_GROUP = 3
# What a match other than one to one costs, in words' worth of length mismatch.
_REGROUP_COST = 0.5
_DIGIT_LETTERS = 4


@dataclass(frozen=True, slots=True)
class Alignment:
    characters: tuple[str, ...] = ()
    starts: tuple[float, ...] = ()
    ends: tuple[float, ...] = ()

    def __add__(self, other: Alignment) -> Alignment:
        return Alignment(
            self.characters + other.characters,
            self.starts + other.starts,
            self.ends + other.ends,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "characters": list(self.characters),
            "character_start_times_seconds": [round(t, 3) for t in self.starts],
            "character_end_times_seconds": [round(t, 3) for t in self.ends],
        }


class TextTimer:
    """Follows `text` through the chunks it is spoken in (`chunking.split_text`'s pieces,
    in order), timing each chunk's characters and the spaces between chunks."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._source = speakable(text)  # what was chunked: same length, same positions
        self._done = 0  # characters timed so far
        self._elapsed = 0.0  # seconds of audio so far

    def chunk(self, chunk: str, pcm: Pcm) -> Alignment:
        """The characters up to the end of `chunk` (what precedes it included), timed."""
        at = self._source.find(chunk, self._done)
        if at < 0:  # not a piece of the text: time it as if it followed what was timed
            at, chunk = self._done, self._source[self._done : self._done + len(chunk)]
        starts, ends = character_times(chunk, pcm.word_times, pcm.duration_seconds)
        lead = starts[0] if starts else 0.0
        gap = at - self._done  # spaces between chunks: from the end of the last to this one
        timed = Alignment(
            tuple(self._text[self._done : at + len(chunk)]),
            (self._elapsed,) * gap + tuple(self._elapsed + t for t in starts),
            (self._elapsed + lead,) * gap + tuple(self._elapsed + t for t in ends),
        )
        self._done = at + len(chunk)
        self._elapsed += pcm.duration_seconds
        return timed

    def rest(self) -> Alignment:
        """Whatever follows the last chunk (trailing spaces), at the end of the audio."""
        rest = len(self._text) - self._done
        self._done = len(self._text)
        return Alignment(
            tuple(self._text[len(self._text) - rest :]),
            (self._elapsed,) * rest,
            (self._elapsed,) * rest,
        )


def character_times(
    chunk: str, spoken: Sequence[WordTime], duration: float
) -> tuple[list[float], list[float]]:
    """Start and end of each character of `chunk`, in seconds from its audio's start, from
    the times of the words the engine spoke (spread evenly where it reports none)."""
    words = [(match.start(), match.end()) for match in _WORD.finditer(chunk)]
    if not words:
        return [0.0] * len(chunk), [0.0] * len(chunk)
    weights = [_weight(chunk[start:end]) for start, end in words]
    spans = _word_spans(weights, spoken, duration)
    starts = [0.0] * len(chunk)
    ends = [0.0] * len(chunk)
    for index, ((first, last), (start, end)) in enumerate(zip(words, spans, strict=True)):
        size = last - first
        for offset in range(size):
            starts[first + offset] = start + (end - start) * offset / size
            ends[first + offset] = start + (end - start) * (offset + 1) / size
        following = words[index + 1][0] if index + 1 < len(words) else len(chunk)
        after = spans[index + 1][0] if index + 1 < len(spans) else end
        for space in range(last, following):
            starts[space], ends[space] = end, max(end, after)
    return starts, ends


def _weight(word: str) -> int:
    """How long `word` takes to say, in letters: a digit is read as a word ("2024" as
    "twenty twenty-four"), punctuation not at all."""
    return max(1, sum(_DIGIT_LETTERS if char.isdigit() else 1 for char in word if char.isalnum()))


def _word_spans(
    letters: Sequence[int], spoken: Sequence[WordTime], duration: float
) -> list[WordTime]:
    """A span for each text word (of `letters`, its `_weight`) from the spoken words."""
    if len(spoken) == len(letters):
        return list(spoken)
    if not spoken:
        return _shared((0.0, duration), letters)
    spans: list[WordTime] = []
    for words, said in _matches(letters, spoken):
        span = (spoken[said.start][0], spoken[said.stop - 1][1])
        spans += _shared(span, letters[words])
    return spans


def _shared(span: WordTime, letters: Sequence[int]) -> list[WordTime]:
    """`span` cut among words in proportion to their letters."""
    start, end = span
    total = sum(letters)
    per_letter = (end - start) / total
    spans, done = [], 0
    for size in letters:
        spans.append((start + per_letter * done, start + per_letter * (done + size)))
        done += size
    return spans


def _matches(letters: Sequence[int], spoken: Sequence[WordTime]) -> list[tuple[slice, slice]]:
    """The cheapest monotone matching of text words to spoken words, group to group: a
    group's cost is how far its length in letters is from its length in time (at the
    chunk's own pace), plus `_REGROUP_COST` unless it is one word to one word."""
    texts, saids = len(letters), len(spoken)
    seconds_per_letter = sum(end - start for start, end in spoken) / max(1, sum(letters))
    word_seconds = max(1e-6, seconds_per_letter * sum(letters) / texts)
    infinity = float("inf")
    cost = [[infinity] * (saids + 1) for _ in range(texts + 1)]
    step: list[list[tuple[int, int]]] = [[(0, 0)] * (saids + 1) for _ in range(texts + 1)]
    cost[0][0] = 0.0
    for i in range(texts + 1):
        for j in range(saids + 1):
            if cost[i][j] == infinity:
                continue
            for k in range(1, _GROUP + 1):
                for m in range(1, _GROUP + 1):
                    if i + k > texts or j + m > saids:
                        continue
                    said = spoken[j + m - 1][1] - spoken[j][0]
                    written = seconds_per_letter * sum(letters[i : i + k])
                    extra = 0.0 if k == m == 1 else _REGROUP_COST * (k + m - 2)
                    total = cost[i][j] + abs(said - written) / word_seconds + extra
                    if total < cost[i + k][j + m]:
                        cost[i + k][j + m] = total
                        step[i + k][j + m] = (k, m)
    if cost[texts][saids] == infinity:  # too lopsided to match: one group of everything
        return [(slice(0, texts), slice(0, saids))]
    matches = []
    i, j = texts, saids
    while i or j:
        k, m = step[i][j]
        matches.append((slice(i - k, i), slice(j - m, j)))
        i, j = i - k, j - m
    return matches[::-1]
