"""When each word is spoken, from the durations a neural voice predicts for its phonemes.

Piper and Kokoro both predict how many audio samples each input symbol lasts before they
generate the audio; exposing that prediction costs nothing. Words are the runs of phonemes
between espeak-ng's spaces, punctuation left out (it lasts as a pause, not as the word).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import onnx

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


def exposing(model_path: Path, tensor: Callable[[onnx.GraphProto], str | None]) -> bytes:
    """The ONNX model at `model_path`, with the tensor `tensor` names in its graph (the
    durations; None when the graph is laid out otherwise) as one more output."""
    model = onnx.load(str(model_path))
    name = tensor(model.graph)
    if name is not None and all(output.name != name for output in model.graph.output):
        model.graph.output.append(onnx.ValueInfoProto(name=name))
    serialized: bytes = model.SerializeToString()
    return serialized


def only(names: Iterable[str]) -> str | None:
    found = list(names)
    return found[0] if len(found) == 1 else None
