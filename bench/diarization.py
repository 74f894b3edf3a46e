"""Figure 19: how well the diarizer tells real voices apart, and what it costs.

Run `python -m bench.diarization [--development]` alone, or as a step of `python -m bench`.

Scored with `pyannote.metrics` on `bench.diarization_set`'s held-out conversations (the
development half is where the settings were chosen): diarization error rate with a collar
of 0.25 s either side of each true boundary (pyannote's `collar=0.5`, the NIST convention),
overlapped speech scored (`skip_overlap=False`), Jaccard error rate, and the share of
conversations whose speaker count came out exact. Beside ours, a peer clustering over the
same windows: spectralcluster (Google's spectral clustering with its own count estimate).
Cost: real-time factor of the whole diarizer (VAD, embeddings, clustering) on one core, and
the peak memory growth of diarizing an hour of the held-out conversations back to back, in a
process of its own (`memory`). What it adds to a request's time is timed over HTTP by
`python -m bench` (its step "diarize").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pyannote.core import Annotation, Segment
from pyannote.metrics.diarization import DiarizationErrorRate, JaccardErrorRate
from spectralcluster import SpectralClusterer

from bench.diarization_set import Conversation, check_data, conversations
from bench.procs import peak_rss_growth
from voice_service.engines.diarization import Diarizer, SpeakerTurn
from voice_service.engines.speaker_embedding import SAMPLE_RATE, SpeakerEncoder
from voice_service.inference.pool import one_blas_thread

COLLAR = 0.5  # pyannote's collar is the whole width: 0.25 s either side
TARGETS = {"overlap-free": 0.10, "overlapping": 0.20}
COUNT_TARGET = 0.80
RTF_TARGET = 0.03
PEER_MAX_SPEAKERS = 8

Diarize = Callable[[npt.NDArray[np.float32]], list[SpeakerTurn]]


@dataclass(frozen=True, slots=True)
class Scores:
    der: float
    jer: float
    count_exact: float
    rtf: float
    per_conversation: tuple[tuple[str, float, int, int], ...]  # name, DER, true, found


def score(set_: Sequence[Conversation], diarize: Diarize) -> Scores:
    """`diarize` on each conversation of `set_`, timed in this process's CPU seconds."""
    found, seconds = {}, 0.0
    for conversation in set_:
        started = time.process_time()
        found[conversation.name] = diarize(conversation.audio)
        seconds += time.process_time() - started
    return scored(set_, found, seconds)


def scored(
    set_: Sequence[Conversation], found: Mapping[str, list[SpeakerTurn]], cpu_seconds: float
) -> Scores:
    """The turns `found` for each conversation of `set_` (by name) against its own, and
    `cpu_seconds` against the audio's."""
    der = DiarizationErrorRate(collar=COLLAR, skip_overlap=False)
    jer = JaccardErrorRate(collar=COLLAR, skip_overlap=False)  # type: ignore[no-untyped-call]
    exact, audio_seconds = 0, 0.0
    rows = []
    for conversation in set_:
        turns = found[conversation.name]
        audio_seconds += conversation.audio.size / SAMPLE_RATE
        reference, hypothesis = _truth(conversation), _annotation(turns)
        one = der(reference, hypothesis)
        jer(reference, hypothesis)
        speakers = len({turn.speaker for turn in turns})
        exact += speakers == len(conversation.speakers)
        rows.append((conversation.name, round(float(one), 4), len(conversation.speakers), speakers))
    return Scores(abs(der), abs(jer), exact / len(set_), cpu_seconds / audio_seconds, tuple(rows))


def _truth(conversation: Conversation) -> Annotation:
    annotation = Annotation()
    for index, turn in enumerate(conversation.turns):
        annotation[Segment(turn.start, turn.end), index] = turn.speaker
    return annotation


def _annotation(turns: list[SpeakerTurn]) -> Annotation:
    annotation = Annotation()
    for index, turn in enumerate(turns):
        annotation[Segment(turn.start, turn.end), index] = f"speaker_{turn.speaker}"
    return annotation


def spectral(
    vectors: npt.NDArray[np.float32], durations: npt.NDArray[np.float64], bounds: tuple[int, int]
) -> npt.NDArray[np.int64]:
    """The peer: spectralcluster's defaults (its own eigen-gap count) within the bounds."""
    low, high = bounds
    if vectors.shape[0] < 3 or high == 1:
        return np.zeros(vectors.shape[0], dtype=np.int64)
    high = min(high, vectors.shape[0] - 1, PEER_MAX_SPEAKERS)
    clusterer = SpectralClusterer(min_clusters=min(low, high), max_clusters=high)
    return np.asarray(clusterer.predict(vectors), dtype=np.int64)


def pipelines() -> dict[str, Diarizer]:
    """Ours and the peer, over the same d-vectors, by the prefix of their figures' keys, with
    BLAS on the calling thread as the service's pool runs them."""
    one_blas_thread()
    encoder = SpeakerEncoder(intra_op_threads=1)
    return {"": Diarizer(encoder), "peer_": Diarizer(encoder, spectral)}


def measure(half: str = "held-out", quick: bool = False) -> dict[str, Any]:
    """Ours and the peer's scores on `half`: both sets, or (quick) the 2-speaker
    conversations without overlap, the pipeline's whole path in a test's time."""
    check_data()
    diarizers = pipelines()
    figures: dict[str, Any] = {}
    for label, overlap in (("overlap-free", False), ("overlapping", True)):
        if quick and overlap:
            continue
        set_ = conversations(half, overlap=overlap)
        if quick:
            set_ = [c for c in set_ if len(c.speakers) == 2]
        key = label.replace("-", "_")
        for prefix, diarizer in diarizers.items():
            scores = score(set_, diarizer.turns)
            figures[f"diarization_{prefix}der_{key}"] = round(scores.der, 4)
            figures[f"diarization_{prefix}jer_{key}"] = round(scores.jer, 4)
            figures[f"diarization_{prefix}count_exact_{key}"] = round(scores.count_exact, 3)
            figures[f"diarization_{prefix}rtf_{key}"] = round(scores.rtf, 4)
            figures[f"diarization_{prefix}{key}_conversations"] = scores.per_conversation
    return figures


def memory(seconds: float) -> dict[str, float]:
    """Peak RSS growth of one `Diarizer.turns` over `seconds` of the held-out conversations
    back to back, in a fresh process (its baseline: the encoder loaded, the audio decoded,
    as a request's audio is before it is diarized)."""
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(_memory, (seconds,))


def _memory(seconds: float) -> dict[str, float]:
    diarizer = pipelines()[""]
    voices = [c.audio for c in conversations("held-out", overlap=False)]
    audio = np.concatenate(voices * -(-round(seconds * SAMPLE_RATE) // sum(map(len, voices))))
    audio = audio[: round(seconds * SAMPLE_RATE)]
    diarizer.turns(audio[: 30 * SAMPLE_RATE])  # onnxruntime's arena at its working size
    started = time.process_time()
    grown_kib, turns, _ = peak_rss_growth(os.getpid(), lambda: diarizer.turns(audio))
    return {
        "audio_seconds": seconds,
        "rss_growth_mib": grown_kib / 1024,
        "rtf": (time.process_time() - started) / seconds,
        "speakers": len({turn.speaker for turn in turns}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--development", action="store_true", help="score the development half")
    parser.add_argument(
        "--memory", type=float, metavar="SECONDS", help="only the memory of this much audio"
    )
    args = parser.parse_args()
    if args.memory:
        print(json.dumps(memory(args.memory), indent=1))
        return
    figures = measure("development" if args.development else "held-out")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
