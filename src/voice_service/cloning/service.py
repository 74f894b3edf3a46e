"""Voice cloning: consented samples in, a timbre profile stored, one unit billed."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voice_service.audio import vad
from voice_service.audio.decode import DecodedAudio, decode_audio
from voice_service.audio.formats import UploadFormat, identify_audio
from voice_service.audio.policy import audio_errors_as_api_errors
from voice_service.books.ledger import Ledger
from voice_service.books.usage.charge import Charge
from voice_service.cloning import repository
from voice_service.cloning.schemas import CONSENT_TEXT, MAX_DESCRIPTION_LENGTH, MAX_NAME_LENGTH
from voice_service.core.errors import InvalidRequest, NotFound, ProviderError, VoiceNotFound
from voice_service.core.ids import new_id
from voice_service.core.models import Voice, utcnow
from voice_service.core.vocabulary import Capability, UsageEndpoint
from voice_service.engines.catalog import CLONER, DECODER
from voice_service.engines.protocols import (
    Clone,
    EngineError,
    Pcm,
    UnusableSample,
    VoiceCloner,
)
from voice_service.inference.admission import Job
from voice_service.inference.providers.provider import Provider
from voice_service.inference.providers.table import voice_key
from voice_service.inference.providers.wire import UPLOAD_NAMES, AudioFile
from voice_service.inference.resolver import cloner_for, remote_speaker
from voice_service.kit.db import transaction
from voice_service.kit.waiting import unless_set
from voice_service.runtime import Runtime
from voice_service.tenancy.audit import Action, Actor
from voice_service.tenancy.principal import Principal
from voice_service.voices.repository import CLONED, PROVIDER, get_visible

logger = logging.getLogger(__name__)

# The part of a sample that is analysed: enough for 30 s of speech after leading silence.
MAX_SAMPLE_SECONDS = 120.0
# Speech Silero must hear in that part: tones, noise, music and modem signals have none.
MIN_SPEECH_SECONDS = 1.0
CLONE_UNITS = 1  # a clone's price, whatever its sample


@dataclass(frozen=True, slots=True)
class CloneRequest:
    name: str
    description: str | None
    consent: str


@dataclass(frozen=True, slots=True)
class AnalysedSample:
    clone: Clone
    sha256: str


def validate_clone_fields(fields: dict[str, str]) -> CloneRequest:
    """The API's multipart fields; consent is the literal text true."""
    if fields.get("consent") != CONSENT_TEXT:
        raise InvalidRequest(
            "consent must be the literal text true, confirming you have permission and "
            "authorization to use this recording for cloning."
        )
    return clone_request(
        fields.get("name", ""), fields.get("description") or None, consent=CONSENT_TEXT
    )


def clone_request(name: str, description: str | None, consent: str) -> CloneRequest:
    """A clone's name and description checked, with the consent that was given."""
    name = name.strip()
    if not name:
        raise InvalidRequest("name: a name for the voice is required.")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidRequest(f"name: at most {MAX_NAME_LENGTH} characters.")
    if description is not None and len(description) > MAX_DESCRIPTION_LENGTH:
        raise InvalidRequest(f"description: at most {MAX_DESCRIPTION_LENGTH} characters.")
    return CloneRequest(name=name, description=description, consent=consent)


async def clone_voice(
    runtime: Runtime,
    principal: Principal,
    ledger: Ledger,
    request: CloneRequest,
    sample: Path,
    actor: Actor | None = None,
) -> Voice:
    """A clone of the sample's voice for the caller's organization, billed one unit; the
    console's `actor` is recorded with it."""
    default_limit = runtime.settings.default_clone_limit
    async with runtime.sessions() as session:
        # Cheap early refusal before the analysis; the authoritative check is below.
        limit = await repository.org_clone_limit(session, principal.org_id)
        live = await repository.count_live_clones(session, principal.org_id)
    _check_limit(live, limit, default_limit)
    await ledger.hold(CLONE_UNITS)

    assert runtime.engines is not None
    cloner = cloner_for(runtime.engines, runtime.providers)
    if isinstance(cloner, Provider):
        return await _clone_at_provider(runtime, cloner, principal, ledger, request, sample, actor)
    analysed = await _analyse(runtime, cloner, ledger, sample)
    return await _record_clone(
        runtime,
        principal,
        ledger,
        request,
        sample,
        engine_voice=cloner.base_voice,
        profile=analysed.clone.profile,
        resemblance=round(analysed.clone.resemblance, 2),
        sha256=analysed.sha256,
        actor=actor,
    )


async def _record_clone(
    runtime: Runtime,
    principal: Principal,
    ledger: Ledger,
    request: CloneRequest,
    sample: Path,
    *,
    engine_voice: str,
    profile: dict[str, Any] | None,
    resemblance: float | None,
    sha256: str,
    actor: Actor | None,
) -> Voice:
    """The clone's row, its sample, its unit and the actor's audit event, committed
    together (the limit checked again under the organization's lock)."""
    default_limit = runtime.settings.default_clone_limit
    voice_id = new_id("voice")
    # The store fails as a 502 and commits nothing; see kit/blobs.py for the order.
    async with (
        runtime.blobs.saving(principal.org_id, voice_id, sample) as save_sample,
        ledger.billed(Charge(UsageEndpoint.CLONE, CLONE_UNITS, voice_id), status=201) as session,
    ):
        limit = await repository.lock_org_clone_limit(session, principal.org_id)
        live = await repository.count_live_clones(session, principal.org_id)
        _check_limit(live, limit, default_limit)
        voice = Voice(
            id=voice_id,
            org_id=principal.org_id,
            type=CLONED,
            name=request.name,
            language=None,
            engine_voice=engine_voice,
            profile=profile,
            resemblance=resemblance,
            description=request.description,
            consent=request.consent,
            consented_at=utcnow(),
            consent_key_id=principal.key_id,
            sample_sha256=sha256,
        )
        await repository.add_clone(session, voice)
        if actor is not None:
            actor.record(
                session, Action.VOICE_CLONED, f"{voice_id} ({request.name}) in {principal.org_id}"
            )
        await save_sample(session)
    return voice


async def _clone_at_provider(
    runtime: Runtime,
    provider: Provider,
    principal: Principal,
    ledger: Ledger,
    request: CloneRequest,
    sample: Path,
    actor: Actor | None,
) -> Voice:
    """An instant clone made at `provider`: added there first (a sample it refuses creates
    nothing here), then recorded here; if that fails, deleted there again."""
    job = Job(Capability.CLONING, DECODER, abandoned=ledger.client_gone)
    with _sample_refusals():
        upload, sha256 = await runtime.pool.run(job, _sample_for_provider, sample)
    added = provider.add_voice(request.name, request.description, upload)
    remote_id = await unless_set(ledger.client_gone, added)
    try:
        voice = await _record_clone(
            runtime,
            principal,
            ledger,
            request,
            sample,
            engine_voice=voice_key(provider.name, remote_id),
            profile=None,
            resemblance=None,  # the provider's voice cannot be heard here until it speaks
            sha256=sha256,
            actor=actor,
        )
    except BaseException:
        # Nothing is billed or kept here, so nothing may be kept there.
        with contextlib.suppress(Exception):
            await provider.delete_voice(remote_id)
        raise
    return voice


def _sample_for_provider(path: Path) -> tuple[AudioFile, str]:
    fmt = identify_audio(path)
    _check_speech(_decoded(path, fmt, vad.RATE))
    name, media_type = UPLOAD_NAMES[fmt]
    return AudioFile(name, path.read_bytes(), media_type), _sha256(path)


@contextlib.contextmanager
def _sample_refusals() -> Iterator[None]:
    """A sample that cannot be decoded, or holds no usable speech, as the API's 4xx."""
    try:
        with audio_errors_as_api_errors("sample"):
            yield
    except UnusableSample as exc:
        raise InvalidRequest(f"file: no usable speech in the sample: {exc}.") from None


def _check_limit(live: int, org_limit: int | None, default_limit: int) -> None:
    if live >= (default_limit if org_limit is None else org_limit):
        raise InvalidRequest(
            "The organization has reached its limit of cloned voices; delete one first."
        )


async def _analyse(
    runtime: Runtime, cloner: VoiceCloner, ledger: Ledger, sample: Path
) -> AnalysedSample:
    job = Job(Capability.CLONING, CLONER, abandoned=ledger.client_gone)
    try:
        with _sample_refusals():
            return await runtime.pool.run(job, _analyse_file, cloner, sample)
    except EngineError as exc:
        logger.error("sample analysis failed for %s: %r", ledger.request_id, exc)
        raise ProviderError() from exc


def _analyse_file(cloner: VoiceCloner, path: Path) -> AnalysedSample:
    fmt = identify_audio(path)
    audio = _decoded(path, fmt, vad.RATE)
    _check_speech(audio)
    if cloner.sample_rate != vad.RATE:
        audio = _decoded(path, fmt, cloner.sample_rate)
    pcm = Pcm(
        samples=(np.clip(audio.samples, -1.0, 1.0) * 32767).astype(np.int16),
        sample_rate=audio.sample_rate,
    )
    return AnalysedSample(clone=cloner.clone(pcm), sha256=_sha256(path))


def _decoded(path: Path, fmt: UploadFormat, rate: int) -> DecodedAudio:
    # The analysis reads at most MAX_SAMPLE_SECONDS: a few hundred kB of Opus can hold 30
    # minutes, which decoded whole would only cost memory (bench/engine_settings.md).
    return decode_audio(path, max_seconds=MAX_SAMPLE_SECONDS, rate=rate, fmt=fmt, truncate=True)


def _check_speech(audio: DecodedAudio) -> None:
    heard = vad.speech_seconds(audio.samples)
    if heard < MIN_SPEECH_SECONDS:
        raise UnusableSample(
            f"it holds {heard:.1f} s of speech; at least {MIN_SPEECH_SECONDS:.0f} s is needed"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


async def delete_voice(
    runtime: Runtime, principal: Principal, voice_id: str, actor: Actor | None = None
) -> None:
    """Delete the organization's clone `voice_id`, here and at its provider; the console's
    `actor` is recorded in the deletion's transaction."""
    async with runtime.sessions() as session:
        voice = await get_visible(session, principal.org_id, voice_id)
    remote = (
        remote_speaker(runtime.providers, voice.engine_voice, voice.profile)
        if voice is not None and voice.type == CLONED
        else None
    )
    if remote is not None:
        # Deleted there first: a provider that fails leaves the clone whole here, to retry.
        await remote.provider.delete_voice(remote.voice)
    async with transaction(runtime.sessions) as session:
        deleted = await repository.delete_clone(session, principal.org_id, voice_id)
        kept = None if deleted else await get_visible(session, principal.org_id, voice_id)
        if deleted and actor is not None:
            actor.record(session, Action.VOICE_DELETED, f"{voice_id} in {principal.org_id}")
    if kept is not None and kept.type == PROVIDER:
        # Still 404 (spec 4.6), but saying why: every organization sees catalogue voices.
        raise NotFound(
            f"Voice {voice_id!r} is a catalogue voice; catalogue voices are shared and "
            "cannot be deleted."
        )
    if not deleted:
        # Other organizations' clones, unknown and deleted ids alike.
        raise VoiceNotFound(voice_id)
    await runtime.blobs.deleted(principal.org_id, voice_id)
