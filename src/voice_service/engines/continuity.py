"""Speech that goes on from text said before it and into text said after it.

A sentence split across requests (ElevenLabs' `previous_text` and `next_text`) would end each
part as if it were the sentence's end: a falling pitch and a lengthened last word where
the sentence goes on. So a part whose sentence is unfinished is said with its neighbours'
words around it, and those words' audio is cut away where the engine says they start or
end (its word times), between two words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from voice_service.engines.alignment import character_times
from voice_service.engines.chunking import ends_sentence, speakable
from voice_service.engines.protocols import Pcm, WordTime

# At most this much of each neighbour is said, in whole words: about two seconds of speech,
# enough for the clause around the cut.
CONTEXT_CHARS = 60
# The edges of a cut fade in and out over this long, so that a cut through a voiced sound
# does not click.
_FADE_SECONDS = 0.005
_WORDS = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Context:
    """The words said before the first chunk of a text and after its last, then cut away."""

    before: str = ""
    after: str = ""


NO_CONTEXT = Context()


def context_of(previous_text: str | None, text: str, next_text: str | None) -> Context:
    """What of its neighbours `text` is said with: the end of a sentence `previous_text`
    leaves unfinished, and the start of `next_text` when `text` leaves its sentence
    unfinished; each at most `CONTEXT_CHARS`, in whole words."""
    before = ""
    if previous_text and previous_text.strip() and not ends_sentence(previous_text):
        before = _last_words(speakable(previous_text))
    after = ""
    if next_text and next_text.strip() and not ends_sentence(text):
        after = _first_words(speakable(next_text))
    return Context(before, after)


def said_in_context(say: Callable[[str], Pcm], chunk: str, context: Context) -> Pcm:
    """`chunk` said by `say` with `context`'s words around it, their audio cut away. A voice
    that reports no word times says the chunk alone: without them the cut is a guess."""
    if not context.before and not context.after:
        return say(chunk)
    whole = " ".join(part for part in (context.before, chunk, context.after) if part)
    pcm = say(whole)
    if not pcm.word_times:
        return say(chunk)
    starts, ends = character_times(whole, pcm.word_times, pcm.duration_seconds)
    first = len(context.before) + 1 if context.before else 0
    last = first + len(chunk) - 1
    begin = (ends[first - 2] + starts[first]) / 2 if context.before else 0.0
    finish = (ends[last] + starts[last + 2]) / 2 if context.after else pcm.duration_seconds
    return _cut(pcm, begin, finish)


def _cut(pcm: Pcm, begin: float, finish: float) -> Pcm:
    """The audio from `begin` to `finish`, its word times with it, faded where it is cut."""
    rate = pcm.sample_rate
    first, stop = round(begin * rate), round(finish * rate)
    samples = pcm.samples[first:stop].astype(np.float32)
    fade = min(round(_FADE_SECONDS * rate), samples.size // 2)
    ramp = np.linspace(0.0, 1.0, fade, endpoint=False, dtype=np.float32)
    if first > 0:
        samples[:fade] *= ramp
    if stop < pcm.samples.size:
        samples[samples.size - fade :] *= ramp[::-1]
    times: tuple[WordTime, ...] = tuple(
        (start - begin, end - begin)
        for start, end in pcm.word_times
        if (start + end) / 2 > begin and (start + end) / 2 < finish
    )
    return Pcm(np.round(samples).astype(np.int16), rate, times)


def _last_words(text: str) -> str:
    """The words at the end of `text`, back to where their sentence starts."""
    words = _WORDS.findall(text)
    kept: list[str] = []
    while words and len(" ".join([words[-1], *kept])) <= CONTEXT_CHARS:
        if kept and ends_sentence(words[-1]):
            break
        kept.insert(0, words.pop())
    return " ".join(kept)


def _first_words(text: str) -> str:
    """The words at the start of `text`, up to where their sentence ends."""
    kept: list[str] = []
    for word in _WORDS.findall(text):
        if len(" ".join([*kept, word])) > CONTEXT_CHARS:
            break
        kept.append(word)
        if ends_sentence(word):
            break
    return " ".join(kept)
