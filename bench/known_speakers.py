"""How near a reference clip of a person comes to that person's speech, and to other
people's: where known speakers' names are kept (`diarization.KNOWN_SIMILARITY`).

Run `python -m bench.known_speakers`. On each half of `bench.diarization_set`'s voices (the
threshold is chosen on the development half and only reported on the held-out one), every
clip of every voice is a reference (`Diarizer.known`) and is compared with the speech of
every other clip, as a conversation's speaker is compared (the duration-weighted mean of its
segments' d-vectors): of the same voice (a name rightly kept) and of other voices (a name
that would label a stranger).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from bench.diarization_set import DEVELOPMENT, HELD_OUT, check_data, voice_clips
from voice_service.engines.diarization import KNOWN_SIMILARITY, Diarizer, voice_of
from voice_service.engines.speaker_embedding import SpeakerEncoder


def similarities(voices: tuple[str, ...], diarizer: Diarizer) -> dict[str, list[float]]:
    """Reference-to-speech cosine similarities: "same" person, "other" people."""
    references = {v: [diarizer.known(v, clip).vector for clip in voice_clips(v)] for v in voices}
    speech = {}
    for voice in voices:
        spoken = []
        for clip in voice_clips(voice):
            voiced = diarizer.voiced(clip)
            durations = np.array([end - start for start, end in voiced.spans])
            spoken.append(voice_of(np.stack(voiced.vectors), durations))
        speech[voice] = spoken
    same, other = [], []
    for voice, refs in references.items():
        for index, reference in enumerate(refs):
            for heard_voice, heard in speech.items():
                for heard_index, vector in enumerate(heard):
                    if heard_voice != voice:
                        other.append(float(reference @ vector))
                    elif heard_index != index:
                        same.append(float(reference @ vector))
    return {"same": sorted(same), "other": sorted(other)}


def errors(found: dict[str, list[float]], threshold: float) -> dict[str, float]:
    """At `threshold`: names dropped for the right person, names given to a stranger."""
    same, other = np.array(found["same"]), np.array(found["other"])
    return {
        "false_rejects": float(np.mean(same <= threshold)),
        "false_accepts": float(np.mean(other > threshold)),
    }


def measure() -> dict[str, Any]:
    check_data()
    diarizer = Diarizer(SpeakerEncoder(intra_op_threads=1))
    development = similarities(DEVELOPMENT, diarizer)
    held_out = similarities(HELD_OUT, diarizer)
    return {
        "threshold_in_use": KNOWN_SIMILARITY,
        **{
            half: {
                "at": {str(t): errors(found, t) for t in (0.5, 0.55, KNOWN_SIMILARITY, 0.65)},
                "percentiles_0_5_50_95_100": _spread(found),
            }
            for half, found in (("development", development), ("held_out", held_out))
        },
    }


def _spread(found: dict[str, list[float]]) -> dict[str, Any]:
    return {
        kind: [round(float(np.percentile(values, q)), 3) for q in (0, 5, 50, 95, 100)]
        for kind, values in found.items()
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    print(json.dumps(measure(), indent=1))


if __name__ == "__main__":
    main()
