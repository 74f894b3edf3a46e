"""People a diarized request names: `known_speaker_names[]` with `known_speaker_references[]`,
as OpenAI takes them. A reference is a data URL of a clip of that person alone (2 to 10 s,
in any format `file` may have), or here also the id of one of the organization's cloned
voices, whose consented sample is the clip: a call centre's agents are labelled by name.
Each is refused in the spec's envelope, naming the field and its place."""

from __future__ import annotations

import base64
import binascii
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sqlalchemy import select

from voice_service.audio.decode import (
    AudioTooLong,
    NonFiniteAudio,
    UndecodableAudio,
    decode_audio,
)
from voice_service.audio.formats import AcceptedAudio, UnsupportedAudio, identify_audio
from voice_service.core.errors import InvalidRequest
from voice_service.core.models import Voice
from voice_service.core.vocabulary import Capability
from voice_service.engines.catalog import DIARIZER
from voice_service.engines.diarization import Diarizer, Floats, KnownSpeaker, is_numbered
from voice_service.engines.speaker_embedding import SAMPLE_RATE
from voice_service.inference.admission import Job
from voice_service.runtime import Runtime
from voice_service.voices.repository import live_clone

NAMES: Final = "known_speaker_names"
REFERENCES: Final = "known_speaker_references"
MAX_KNOWN_SPEAKERS: Final = 4  # OpenAI's bound
# The form fields that name them, and the most a reference's data URL may take.
FIELDS: Final = frozenset(f"{name}{tail}" for name in (NAMES, REFERENCES) for tail in ("", "[]"))
MAX_REFERENCE_BYTES: Final = 2 * 1024 * 1024
MAX_NAME_LENGTH: Final = 64
CLIP_SECONDS: Final = (2.0, 10.0)  # a data URL's clip, as OpenAI bounds it
SAMPLE_SECONDS: Final = 30.0  # the most of a clone's sample heard
_DATA_URL: Final = re.compile(r"data:(?P<type>[^,;]*)(;[^,;]*)*;base64,(?P<data>.*)", re.S)
# How the native form's fields are described in OpenAPI (OpenAI's are its own).
KNOWN_SPEAKER_FORM_FIELDS: Final[dict[str, dict[str, Any]]] = {
    NAMES: {
        "type": "array",
        "items": {"type": "string", "maxLength": MAX_NAME_LENGTH},
        "maxItems": MAX_KNOWN_SPEAKERS,
        "description": "In a diarized request (diarize=true; OpenAI's diarized_json): the "
        "names of people who may speak (the field repeated; known_speaker_names[] too), each "
        "labelling the speaker whose voice is nearest the reference in the same place of "
        "known_speaker_references.",
    },
    REFERENCES: {
        "type": "array",
        "items": {"type": "string"},
        "maxItems": MAX_KNOWN_SPEAKERS,
        "description": "Each named person's voice: a base64 data URL of a 2-10 s clip of "
        "them alone (data:audio/wav;base64,…), or the id of one of the organization's "
        "cloned voices (its sample is the clip).",
    },
}


@dataclass(frozen=True, slots=True)
class Reference:
    """A named person and where their voice is: a clip's bytes, or a cloned voice's id."""

    name: str
    clip: bytes | None
    voice_id: str | None


async def named_people(
    runtime: Runtime,
    org_id: str,
    values: Callable[[str], list[str]],
    *,
    diarized: bool,
    needs: str,
) -> list[Clip]:
    """The clips of the people the form's `values` name; they name speakers only in a
    diarized request (`needs` says what makes one)."""
    given = _references(values)
    if given and not diarized:
        raise InvalidRequest(f"{NAMES}[]: only with {needs}.", param=NAMES)
    return await _reference_clips(runtime, org_id, given)


def _references(values: Callable[[str], list[str]]) -> list[Reference]:
    """The people the form's `values` (a field's values, in order) name; [] for none."""
    names = values(f"{NAMES}[]") + values(NAMES)
    given = values(f"{REFERENCES}[]") + values(REFERENCES)
    if len(names) != len(given):
        raise InvalidRequest(
            f"{NAMES}[]: one name for each of {REFERENCES}[] "
            f"({len(names)} names, {len(given)} references).",
            param=NAMES,
        )
    if len(names) > MAX_KNOWN_SPEAKERS:
        raise InvalidRequest(f"{NAMES}[]: at most {MAX_KNOWN_SPEAKERS}.", param=NAMES)
    for index, name in enumerate(names):
        if not 0 < len(name) <= MAX_NAME_LENGTH or name != name.strip():
            raise InvalidRequest(
                f"{NAMES}[{index}]: 1 to {MAX_NAME_LENGTH} characters, not starting or ending "
                "in a space.",
                param=NAMES,
            )
        if is_numbered(name) or names.index(name) != index:
            raise InvalidRequest(
                f"{NAMES}[{index}]: {name!r} is taken (by another name, or as the label of a "
                "speaker no one named).",
                param=NAMES,
            )
    return [
        _reference(index, name, value)
        for index, (name, value) in enumerate(zip(names, given, strict=True))
    ]


def _reference(index: int, name: str, value: str) -> Reference:
    if value.startswith("voice_"):
        return Reference(name, None, value)
    found = _DATA_URL.fullmatch(value)
    if found is not None and (found["type"].startswith("audio/") or not found["type"]):
        try:
            return Reference(name, base64.b64decode(found["data"], validate=True), None)
        except binascii.Error:
            pass
    raise InvalidRequest(
        f"{REFERENCES}[{index}]: a base64 data URL of audio (data:audio/wav;base64,…) or the "
        "id of one of the organization's cloned voices.",
        param=REFERENCES,
    )


@dataclass(frozen=True, slots=True)
class Clip:
    """A named person's voice as audio bytes, and the field it came from."""

    name: str
    audio: bytes
    sample: bool  # a clone's sample (heard up to SAMPLE_SECONDS), else a 2-10 s clip
    where: str


async def _reference_clips(runtime: Runtime, org_id: str, given: Sequence[Reference]) -> list[Clip]:
    """Each person's clip: the data URL's, or their clone's sample."""
    clips = []
    for index, reference in enumerate(given):
        where = f"{REFERENCES}[{index}]"
        if reference.voice_id is None:
            assert reference.clip is not None
            clips.append(Clip(reference.name, reference.clip, False, where))
        else:
            sample = await _clone_sample(runtime, org_id, reference.voice_id, where)
            clips.append(Clip(reference.name, sample, True, where))
    return clips


async def _clone_sample(runtime: Runtime, org_id: str, voice_id: str, where: str) -> bytes:
    async with runtime.sessions() as session:
        found = await session.scalar(
            select(Voice.id).where(Voice.id == voice_id, Voice.org_id == org_id, live_clone())
        )
    if found is None:
        raise InvalidRequest(
            f"{where}: {voice_id} is not one of the organization's cloned voices.",
            param=REFERENCES,
        )
    try:
        return await runtime.blobs.sample(org_id, voice_id)
    except LookupError:
        raise InvalidRequest(
            f"{where}: {voice_id} keeps no sample to hear its speaker in.", param=REFERENCES
        ) from None


async def known_voices(
    runtime: Runtime, clips: Sequence[Clip], accepted: AcceptedAudio
) -> tuple[KnownSpeaker, ...]:
    """`heard` on an inference worker: a job's people, heard once when it is submitted and
    kept with it."""
    if not clips:
        return ()
    assert runtime.engines is not None and runtime.engines.diarizer is not None
    return await runtime.pool.run(
        Job(Capability.SPEECH_TO_TEXT, DIARIZER),
        heard,
        runtime.engines.diarizer,
        clips,
        accepted,
        runtime.uploads_dir,
    )


def heard(
    diarizer: Diarizer, clips: Sequence[Clip], accepted: AcceptedAudio, directory: Path
) -> tuple[KnownSpeaker, ...]:
    """Each person's voice in their clip (decoded through a file in `directory`); a
    request's clip must last 2 to 10 s, a clone's sample is heard up to SAMPLE_SECONDS."""
    return tuple(diarizer.known(clip.name, _decoded(clip, accepted, directory)) for clip in clips)


def _decoded(clip: Clip, accepted: AcceptedAudio, directory: Path) -> Floats:
    shortest, longest = CLIP_SECONDS
    with tempfile.NamedTemporaryFile(dir=directory, prefix="reference-") as file:
        file.write(clip.audio)
        file.flush()
        path = Path(file.name)
        try:
            audio = decode_audio(
                path,
                max_seconds=SAMPLE_SECONDS if clip.sample else longest,
                rate=SAMPLE_RATE,
                fmt=identify_audio(path, accepted),
                truncate=clip.sample,
            )
        except (UnsupportedAudio, UndecodableAudio, NonFiniteAudio):
            raise InvalidRequest(
                f"{clip.where}: not audio this service decodes.", param=REFERENCES
            ) from None
        except AudioTooLong:
            raise InvalidRequest(
                f"{clip.where}: longer than {longest:g} s.", param=REFERENCES
            ) from None
    if not clip.sample and audio.duration_seconds < shortest:
        raise InvalidRequest(f"{clip.where}: shorter than {shortest:g} s.", param=REFERENCES)
    return audio.samples
