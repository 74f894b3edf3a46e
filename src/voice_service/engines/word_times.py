"""When each word is spoken, from the durations a neural voice predicts for its phonemes.

Piper and Kokoro both predict how many audio samples each input symbol lasts before they
generate the audio; exposing that prediction costs nothing. Words are the runs of phonemes
between espeak-ng's spaces, punctuation left out (it lasts as a pause, not as the word).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from voice_service.engines.protocols import WordTime

_PUNCTUATION = frozenset(".,;:!?¡¿…—\u2013-\"'«»“”„()[]")


def word_times(
    phonemes: Iterable[tuple[str, float]], lead: float, sample_rate: int
) -> list[WordTime]:
    """The spans of the words of `phonemes` (each phoneme with the samples it lasts),
    which begin `lead` samples into the audio."""
    spans: list[WordTime] = []
    position = lead
    start: float | None = None
    end = 0.0
    for phoneme, samples in phonemes:
        if phoneme.isspace():
            if start is not None:
                spans.append((start / sample_rate, end / sample_rate))
            start = None
        elif phoneme not in _PUNCTUATION:
            start = position if start is None else start
            end = position + samples
        position += samples
    if start is not None:
        spans.append((start / sample_rate, end / sample_rate))
    return spans


def shifted(spans: Sequence[WordTime], seconds: float) -> list[WordTime]:
    return [(start + seconds, end + seconds) for start, end in spans]


def only(names: Iterable[str]) -> str | None:
    found = list(names)
    return found[0] if len(found) == 1 else None
