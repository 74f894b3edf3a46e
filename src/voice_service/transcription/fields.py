"""The transcription options every native surface reads from its form fields (the sync
endpoints and jobs), each refused in the spec's envelope with the field it names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from voice_service.core.errors import InvalidRequest
from voice_service.engines.diarization import MAX_SPEAKERS, SpeakerHints

SPEAKER_FIELDS = ("num_speakers", "min_speakers", "max_speakers")
# How the form fields `speaker_hints` reads are described in OpenAPI.
SPEAKER_FORM_FIELDS: Final[dict[str, dict[str, Any]]] = {
    "diarize": {
        "type": "boolean",
        "default": False,
        "description": "Tell the speakers apart: `segments`, each with its `speaker` "
        "(speaker_0, speaker_1, …), split wherever the speaker changes. Billed as the "
        "same seconds of audio.",
    },
    **{
        name: {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SPEAKERS,
            "description": description + " (with diarize=true).",
        }
        for name, description in zip(
            SPEAKER_FIELDS,
            (
                "How many people speak, where known",
                "At least this many speak",
                "At most this many speak",
            ),
            strict=True,
        )
    },
}


def flag(value: str | None, name: str) -> bool:
    if value in (None, "", "false"):
        return False
    if value == "true":
        return True
    raise InvalidRequest(f"{name}: true or false.", param=name)


def word_timestamps(value: str | None) -> bool:
    """Whether word times are asked for (`timestamps=word`; segment is the default)."""
    if value in (None, "", "segment"):
        return False
    if value == "word":
        return True
    raise InvalidRequest("timestamps: segment or word.", param="timestamps")


def speaker_hints(fields: Mapping[str, str]) -> SpeakerHints | None:
    """What `diarize=true` and the speaker-count hints ask for; None without diarize."""
    counts = {name: _count(fields.get(name), name) for name in SPEAKER_FIELDS}
    if not flag(fields.get("diarize"), "diarize"):
        for name, count in counts.items():
            if count is not None:
                raise InvalidRequest(f"{name}: only with diarize=true.", param=name)
        return None
    hints = SpeakerHints(counts["num_speakers"], counts["min_speakers"], counts["max_speakers"])
    if hints.num_speakers is not None and (
        hints.min_speakers is not None or hints.max_speakers is not None
    ):
        raise InvalidRequest(
            "num_speakers: give it, or min_speakers and max_speakers, not both.",
            param="num_speakers",
        )
    low, high = hints.bounds()
    if low > high:
        raise InvalidRequest(
            f"min_speakers: {low} is more than max_speakers ({high}).", param="min_speakers"
        )
    return hints


def _count(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    # ASCII digits only: int() also takes spaces, underscores, signs and other scripts' digits.
    count = int(value) if value.isascii() and value.isdigit() else 0
    if not 1 <= count <= MAX_SPEAKERS:
        raise InvalidRequest(f"{name}: a whole number from 1 to {MAX_SPEAKERS}.", param=name)
    return count
