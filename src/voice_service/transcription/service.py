"""Transcription: validate the upload by content, decode bounded, transcribe, bill seconds.

Every endpoint that transcribes goes through `transcript_parts`: first what the audio is
(its language and exact duration), then the transcript segment by segment, each 30 s
window decoded only when the caller asks for it. The native API and OpenAI's JSON formats
collect the parts (`transcribe_upload`); OpenAI's `stream` sends them as they come.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncGenerator, Coroutine, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from voice_service.audio.decode import DecodedAudio, decode_audio
from voice_service.audio.encode import wav_of
from voice_service.audio.formats import AcceptedAudio, identify_audio
from voice_service.audio.policy import NATIVE_POLICY, AudioPolicy, audio_errors_as_api_errors
from voice_service.audio.vad import RATE, Floats
from voice_service.books.ledger import Ledger
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import InvalidRequest, ProviderError
from voice_service.core.vocabulary import Capability
from voice_service.engines.catalog import DECODER, DIARIZER
from voice_service.engines.deadline import InferenceBudget
from voice_service.engines.diarization import SpeakerHints, SpeakerTurn, attributed
from voice_service.engines.protocols import (
    EngineError,
    Segment,
    SpeechToText,
    TranscribeOptions,
)
from voice_service.inference.admission import Job
from voice_service.inference.engines import Engines
from voice_service.inference.providers.provider import Provider
from voice_service.inference.providers.wire import UPLOAD_NAMES, AudioFile
from voice_service.inference.resolver import (
    NO_TRANSCRIBER,
    can_transcribe,
    heard_by,
    transcriber_for,
    transcription_languages,
    transcription_models,
)
from voice_service.kit.waiting import unless_set
from voice_service.runtime import Runtime
from voice_service.transcription.known_speakers import Clip, heard

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AudioInfo:
    language: str | None  # given, or detected (None: a provider that did not say)
    duration_seconds: Fraction  # exact, as decode_audio counts it


TranscriptPart = AudioInfo | Segment


@dataclass(slots=True)
class TimedTranscript:
    """What the engine made of the audio: its info and the timed segments, which each API
    renders in its own shape (the native `schemas.Transcript`, OpenAI's formats)."""

    info: AudioInfo
    segments: list[Segment] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(segment.text for segment in self.segments).strip()


def parse_language(value: str | None, known: frozenset[str]) -> str | None:
    """None (detect) for an omitted or empty hint; else a code the model knows."""
    if value is None or not value.strip():
        return None
    code = value.strip().lower()
    if code not in known:
        raise InvalidRequest(
            f"language: {value!r} is not an ISO 639-1 code the model knows "
            "(two letters, e.g. en, de, es); omit it to detect the language.",
            param="language",
        )
    return code


# OpenAI's transcription models' names: each is this node's default model.
OPENAI_TRANSCRIPTION_MODELS = (
    "whisper-1",
    "gpt-4o-transcribe",
    "gpt-4o-mini-transcribe",
    "gpt-4o-transcribe-diarize",
)


def parse_model(
    value: str | None, offered: Sequence[str], param: str, aliases: Sequence[str] = ()
) -> str | None:
    """None (the node's default model) for an omitted or empty name or one of `aliases`;
    else one of the `offered` models."""
    if value is None or not value.strip() or value.strip() in aliases:
        return None
    name = value.strip()
    if name in offered:
        return name
    if not offered:
        raise InvalidRequest(
            f"{param}: {value!r}: this node's providers transcribe, chosen by language; "
            f"omit {param}.",
            param=param,
        )
    also = f"; {', '.join(aliases)} name it too" if aliases else ""
    raise InvalidRequest(
        f"{param}: {value!r} is not a model this node offers; it offers "
        f"{', '.join(offered)} (the first is the default{also}).",
        param=param,
    )


def offered_models(runtime: Runtime) -> tuple[str, ...]:
    """The transcription models a request may name, the default first."""
    assert runtime.engines is not None
    return transcription_models(runtime.engines)


@dataclass(frozen=True, slots=True)
class OfferedModel:
    name: str
    engine: str
    languages: frozenset[str]
    default: bool
    loaded: bool  # in this process's memory now


def offered_model_list(runtime: Runtime) -> list[OfferedModel]:
    """This node's transcription models, the default first (none when providers alone
    transcribe)."""
    assert runtime.engines is not None
    local = runtime.engines.transcribers
    if local is None:
        return []
    loaded = set(local.loaded())
    return [
        OfferedModel(
            name,
            runtime.engines.transcriber_name,
            local.languages(),
            default=name == local.default,
            loaded=name in loaded,
        )
        for name in local.names
    ]


def known_languages(runtime: Runtime) -> frozenset[str]:
    """The language hints this node takes: its own engine's and its providers'."""
    assert runtime.engines is not None
    return transcription_languages(runtime.engines, runtime.providers)


async def transcribe_upload(
    runtime: Runtime,
    ledger: Ledger,
    endpoint: str,
    path: Path,
    options: TranscribeOptions,
    policy: AudioPolicy = NATIVE_POLICY,
    speakers: SpeakerHints | None = None,
    known: Sequence[Clip] = (),
) -> TimedTranscript:
    """The whole transcript of the file at `path`, billed once it is made; with `speakers`,
    diarized (each segment and word with its speaker: `engines.diarization.attributed`),
    the `known` people named where their voices are heard."""
    if speakers is None:
        transcript = await _collected(runtime, ledger, path, options, policy)
    else:
        transcript = await _diarized(runtime, ledger, path, options, policy, speakers, known)
    await ledger.bill(transcription_charge(endpoint, transcript.info))
    return transcript


async def _diarized(
    runtime: Runtime,
    ledger: Ledger,
    path: Path,
    options: TranscribeOptions,
    policy: AudioPolicy,
    speakers: SpeakerHints,
    known: Sequence[Clip],
) -> TimedTranscript:
    job = Job(Capability.SPEECH_TO_TEXT, DIARIZER, abandoned=ledger.client_gone)

    def telling(source: DecodedAudio | Path) -> Coroutine[Any, Any, list[SpeakerTurn]]:
        return runtime.pool.run(
            job,
            _speaker_turns,
            runtime.engines,
            source,
            policy.accepted,
            runtime.settings.max_audio_seconds,
            speakers,
            known,
            runtime.uploads_dir,
        )

    # Word times place the speaker changes.
    asked = replace(options, timestamps=True, word_timestamps=True)
    if _upstream_diarizes(runtime, options, speakers, known):
        upstream = replace(asked, diarize=True, num_speakers=speakers.num_speakers)
        transcript = await _collected(runtime, ledger, path, upstream, policy)
        if any(segment.speaker is None for segment in transcript.segments):
            logger.warning("the transcription provider answered without speakers")
            transcript.segments = attributed(transcript.segments, await telling(path))
        return _words_if_asked(transcript, options)
    # Otherwise the speakers are told apart here, meanwhile, on a worker of their own where
    # one is free, once the audio has passed its checks: decoded once for both.
    audio = await _checked_audio(runtime, ledger, path, policy)
    turns = asyncio.ensure_future(telling(audio))
    turns.add_done_callback(_retrieved)
    try:
        transcript = await _collected(runtime, ledger, path, asked, policy, audio)
        transcript.segments = attributed(transcript.segments, await turns)
    finally:
        turns.cancel()
    return _words_if_asked(transcript, options)


def _upstream_diarizes(
    runtime: Runtime, options: TranscribeOptions, speakers: SpeakerHints, known: Sequence[Clip]
) -> bool:
    """The provider that transcribes `options.language` tells the speakers apart itself,
    and is asked for nothing it cannot do (bounds on their number, people to name, and what
    `Provider.diarizes` says its kind cannot take)."""
    assert runtime.engines is not None
    transcriber = transcriber_for(
        runtime.engines, runtime.providers, options.language, options.model
    )
    bounded = speakers.min_speakers is not None or speakers.max_speakers is not None
    if not isinstance(transcriber, Provider) or bounded or known:
        return False
    return transcriber.diarizes(options, speakers.num_speakers)


def _words_if_asked(transcript: TimedTranscript, options: TranscribeOptions) -> TimedTranscript:
    if not options.word_timestamps:
        transcript.segments = [replace(segment, words=()) for segment in transcript.segments]
    return transcript


def _retrieved(task: asyncio.Future[list[SpeakerTurn]]) -> None:
    """An outcome no one awaited (the transcript failed first) is not an error to log."""
    if not task.cancelled():
        task.exception()


async def _collected(
    runtime: Runtime,
    ledger: Ledger,
    path: Path,
    options: TranscribeOptions,
    policy: AudioPolicy,
    audio: DecodedAudio | None = None,
) -> TimedTranscript:
    """The transcript's parts collected (`audio`: as for `transcript_parts`)."""
    transcript: TimedTranscript | None = None
    parts = transcript_parts(runtime, ledger, path, options, policy, audio)
    async with aclosing(parts):
        async for part in parts:
            if isinstance(part, AudioInfo):
                transcript = TimedTranscript(part)
            else:
                assert transcript is not None
                transcript.segments.append(part)
    assert transcript is not None
    return transcript


def _speaker_turns(
    engines: Engines | None,
    source: DecodedAudio | Path,
    accepted: AcceptedAudio,
    max_seconds: float,
    speakers: SpeakerHints,
    known: Sequence[Clip],
    directory: Path,
) -> list[SpeakerTurn]:
    assert engines is not None and engines.diarizer is not None
    diarizer = engines.diarizer
    named = replace(speakers, known=heard(diarizer, known, accepted, directory))
    audio = source if isinstance(source, DecodedAudio) else _decode(source, accepted, max_seconds)
    return diarizer.turns(audio.samples, named)


async def transcript_parts(
    runtime: Runtime,
    ledger: Ledger,
    path: Path,
    options: TranscribeOptions,
    policy: AudioPolicy = NATIVE_POLICY,
    audio: DecodedAudio | None = None,
) -> AsyncGenerator[TranscriptPart, None]:
    """`AudioInfo` first, then each segment as it is decoded; not billed (the caller
    bills `transcription_charge`). Audio and engine failures are API errors here, a file the
    `policy` does not accept its refusal. A provider transcribes when the providers file
    routes `options.language` to one (see `Providers.transcriber`). `audio`: the file at
    `path` already decoded, and its seconds held (`_checked_audio`)."""
    assert runtime.engines is not None
    transcriber = transcriber_for(
        runtime.engines, runtime.providers, options.language, options.model
    )
    ledger.heard_by(heard_by(transcriber))
    if isinstance(transcriber, Provider):
        remote = _remote_transcript_parts(
            runtime, transcriber, ledger, path, options, policy, audio
        )
        async with aclosing(remote) as parts:
            async for part in parts:
                yield part
        return
    if audio is None and ledger.capped:
        # Its seconds are held against the cap before any inference: decoded on its own.
        audio = await _checked_audio(runtime, ledger, path, policy)
    made = runtime.pool.stream(
        Job(Capability.SPEECH_TO_TEXT, transcriber.name, abandoned=ledger.client_gone),
        local_transcript_parts,
        transcriber.engine,
        path if audio is None else audio,
        policy.accepted,
        options,
        runtime.settings.max_audio_seconds,
        runtime.inference_budget,
    )
    seconds = 0.0
    try:
        with audio_errors_as_api_errors("audio", policy):
            async with aclosing(made) as parts:
                async for part in parts:
                    if isinstance(part, AudioInfo):
                        seconds = float(part.duration_seconds)
                    yield part
        runtime.metrics.count_audio(Capability.SPEECH_TO_TEXT, seconds)  # all transcribed
    except EngineError as exc:
        logger.error("transcription failed for %s: %r", ledger.request_id, exc)
        raise ProviderError() from exc


async def _remote_transcript_parts(
    runtime: Runtime,
    provider: Provider,
    ledger: Ledger,
    path: Path,
    options: TranscribeOptions,
    policy: AudioPolicy,
    audio: DecodedAudio | None,
) -> AsyncGenerator[TranscriptPart, None]:
    """The provider's transcript, as parts. The file is checked and decoded here first
    (unless `audio` says it was): the seconds billed are our decoder's, and a file we would
    refuse never leaves the node."""
    job = Job(Capability.SPEECH_TO_TEXT, DECODER, abandoned=ledger.client_gone)
    measured = None if audio is None else audio.duration_seconds
    with audio_errors_as_api_errors("audio", policy):
        upload, duration = await runtime.pool.run(
            job,
            _upload_for_provider,
            path,
            policy.accepted,
            runtime.settings.max_audio_seconds,
            measured,
        )
    if audio is None:
        await ledger.hold(billed_seconds(duration))
    transcript = await unless_set(
        ledger.client_gone, provider.transcribe(upload, options, float(duration))
    )
    runtime.metrics.count_audio(Capability.SPEECH_TO_TEXT, float(duration))
    yield AudioInfo(transcript.language or options.language, duration)
    for segment in transcript.segments:
        yield segment


def _upload_for_provider(
    path: Path, accepted: AcceptedAudio, max_seconds: float, measured: Fraction | None
) -> tuple[AudioFile, Fraction]:
    """The upload as a provider gets it (named by its real format: OpenAI goes by the
    name), and its exact duration (decoded for it, unless `measured` already)."""
    fmt = identify_audio(path, accepted)
    duration = measured
    if duration is None:
        duration = decode_audio(path, max_seconds=max_seconds, fmt=fmt).duration_seconds
    name, media_type = UPLOAD_NAMES[fmt]
    return AudioFile(name, path.read_bytes(), media_type), duration


def transcription_charge(endpoint: str, info: AudioInfo) -> Charge:
    """What transcribing the audio costs: one unit per started second."""
    return Charge(endpoint, billed_seconds(info.duration_seconds))


def billed_seconds(duration_seconds: Fraction) -> int:
    # One unit per started second, rounded up in exact arithmetic (a float sum once billed
    # 5.000 s as 6); audio of unknown (zero) length still costs one.
    return max(1, math.ceil(duration_seconds))


async def _checked_audio(
    runtime: Runtime, ledger: Ledger, path: Path, policy: AudioPolicy
) -> DecodedAudio:
    """The file decoded on a worker of its own, and its seconds held against any cap:
    before any inference."""
    decoding = Job(Capability.SPEECH_TO_TEXT, DECODER, abandoned=ledger.client_gone)
    with audio_errors_as_api_errors("audio", policy):
        audio = await runtime.pool.run(
            decoding, _decode, path, policy.accepted, runtime.settings.max_audio_seconds
        )
    await ledger.hold(billed_seconds(audio.duration_seconds))
    return audio


def _decode(path: Path, accepted: AcceptedAudio, max_seconds: float) -> DecodedAudio:
    return decode_audio(path, max_seconds=max_seconds, fmt=identify_audio(path, accepted))


def local_transcript_parts(
    transcriber: SpeechToText,
    source: DecodedAudio | Path,
    accepted: AcceptedAudio,
    options: TranscribeOptions,
    max_seconds: float,
    budget: InferenceBudget,
) -> Iterator[TranscriptPart]:
    deadline = budget.start()
    audio = source if isinstance(source, DecodedAudio) else _decode(source, accepted, max_seconds)
    stream = transcriber.stream(audio.samples, options)
    yield AudioInfo(stream.language, audio.duration_seconds)
    for segment in stream.segments:
        deadline.check(float(audio.duration_seconds))
        yield segment


@dataclass(frozen=True, slots=True)
class HeardText:
    """What a short clip of speech said (a live turn, a voice command)."""

    text: str
    language: str | None  # None: a provider that did not say
    segments: tuple[str, ...]  # each segment's text, stripped


def require_transcriber(runtime: Runtime) -> None:
    """Refuse a transcription this node can route nowhere (no engine, no provider)."""
    assert runtime.engines is not None
    if not can_transcribe(runtime.engines, runtime.providers):
        raise ProviderError(NO_TRANSCRIBER)


async def transcribe_samples(
    runtime: Runtime,
    audio: Floats,
    options: TranscribeOptions,
    ledger: Ledger,
    *,
    live: bool,
) -> HeardText:
    """16 kHz mono samples' text: from the provider the providers file routes their
    language to, else from this node's engine, through the same admission as every
    transcription (a `live` clip goes first in its queue)."""
    assert runtime.engines is not None
    transcriber = transcriber_for(
        runtime.engines, runtime.providers, options.language, options.model
    )
    ledger.heard_by(heard_by(transcriber))
    if isinstance(transcriber, Provider):
        upload = AudioFile("speech.wav", wav_of(audio, RATE), "audio/wav")
        remote = await transcriber.transcribe(upload, options, audio.size / RATE)
        texts = tuple(segment.text.strip() for segment in remote.segments)
        return HeardText(remote.text.strip(), remote.language, texts)
    job = Job(Capability.SPEECH_TO_TEXT, transcriber.name, live=live)
    try:
        return await runtime.pool.run(job, _heard, transcriber.engine, audio, options)
    except EngineError as exc:
        logger.error("transcribing %s failed: %r", ledger.request_id, exc)
        raise ProviderError() from exc


def _heard(transcriber: SpeechToText, audio: Floats, options: TranscribeOptions) -> HeardText:
    stream = transcriber.stream(audio, options)
    texts = tuple(segment.text.strip() for segment in stream.segments)
    return HeardText(" ".join(texts).strip(), stream.language, texts)
