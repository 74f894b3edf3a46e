"""Running one transcription job: its audio fetched from the blob store, decoded as it goes,
cut into pieces at pauses (`audio.pieces`), each piece transcribed at batch priority (below
every live turn and request), progress recorded after each, and the job settled once: its
transcript and usage row in one transaction, or its failure, billed nothing. A job that
tells its speakers apart gathers each piece's voiced segments beside its transcript and
clusters them once, at the end, over the whole recording.

A run may be repeated (its node killed, the queue handing the job to another worker): a run
starts the job over from its audio, and only the first to settle it bills it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Coroutine, Iterator
from contextlib import aclosing
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from voice_service.audio.decode import DecodedAudio, decode_chunks
from voice_service.audio.encode import wav_of
from voice_service.audio.formats import AcceptedAudio, identify_audio
from voice_service.audio.pieces import Piece, PieceCutter
from voice_service.audio.policy import NATIVE_POLICY, audio_errors_as_api_errors
from voice_service.audio.vad import RATE
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import ApiError, InternalError, InvalidRequest, ProviderError
from voice_service.core.models import TranscriptionJob
from voice_service.core.vocabulary import Capability, JobStatus, WebhookEvent
from voice_service.engines.catalog import DECODER, DIARIZER
from voice_service.engines.diarization import Diarizer, SpeakerHints, VoicedSegments, attributed
from voice_service.engines.protocols import (
    EngineError,
    Segment,
    TranscribeOptions,
    Word,
)
from voice_service.inference.admission import Job
from voice_service.inference.providers.provider import Provider
from voice_service.inference.providers.wire import AudioFile
from voice_service.inference.resolver import (
    LocalTranscriber,
    transcriber_for,
    transcription_models,
)
from voice_service.jobs import repository
from voice_service.jobs.events import announce
from voice_service.jobs.service import audio_let_go
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.runtime import Runtime
from voice_service.transcription.schemas import segment_fields
from voice_service.transcription.service import AudioInfo, billed_seconds, local_transcript_parts

logger = logging.getLogger(__name__)


class JobFailed(Exception):
    """The job cannot succeed however often it is tried (its audio, its engine's refusal)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Cancelled(Exception):
    """Its owner cancelled the job while it ran."""


@dataclass(slots=True)
class _Transcript:
    language: str | None
    segments: list[Segment]
    voiced: VoicedSegments  # where it is diarized
    duration: Fraction = Fraction(0)


@dataclass(frozen=True, slots=True)
class _PieceResult:
    language: str | None
    segments: list[Segment]  # timed from the start of the whole audio
    voiced: VoicedSegments


_Transcribing = Coroutine[Any, Any, _PieceResult]


async def run_job(runtime: Runtime, webhooks: SqlQueue, job_id: str, *, last_attempt: bool) -> None:
    """Run the job to its end, and tell its webhooks (through the `webhooks` queue). A
    failure of the audio or the engine fails it at once; anything else (a store or database
    outage) is raised for the queue to retry, and fails the job only on its
    `last_attempt`."""
    clock = runtime.books.clock
    async with transaction(runtime.sessions) as session:
        if not await repository.start(session, job_id, clock()):
            return  # cancelled, deleted or settled meanwhile
        job = await repository.job_by_id(session, job_id)
    assert job is not None
    try:
        transcript = await _transcribed(runtime, job)
    except _Cancelled:
        return
    except JobFailed as failure:
        await fail_job(runtime, webhooks, job, failure.code, failure.message)
        return
    except Exception as exc:
        if last_attempt:
            logger.error("transcription job %s failed: %r", job_id, exc)
            message = "The job failed; submit it again."
            await fail_job(runtime, webhooks, job, InternalError.code, message)
        raise
    await _complete(runtime, webhooks, job, transcript)


async def _transcribed(runtime: Runtime, job: TranscriptionJob) -> _Transcript:
    gone = JobFailed(InvalidRequest.code, "The job's audio was deleted.")
    if job.audio is None:
        raise gone
    assert runtime.engines is not None
    path = runtime.uploads_dir / f"{job.id}.audio"
    try:
        try:
            await runtime.blobs.get_file(job.audio, path)
        except LookupError:
            raise gone from None
        transcript = _Transcript(job.language, [], VoicedSegments())
        speakers = None if job.speakers is None else SpeakerHints.of(job.speakers)
        if speakers is not None and any(
            person.encoder != _diarizer(runtime).encoder for person in speakers.known
        ):
            raise JobFailed(
                InvalidRequest.code,
                "The job's known speakers were heard with another speaker model than this "
                "node's (VOICE_SERVICE_SPEAKER_MODEL differs); submit it again.",
            )
        # Word times place the changes of speaker.
        options = TranscribeOptions(
            language=job.language,
            model=job.model,
            timestamps=True,
            word_timestamps=job.word_timestamps or speakers is not None,
        )
        if job.model is not None and job.model not in transcription_models(runtime.engines):
            raise JobFailed(
                InvalidRequest.code,
                f"The node that ran the job does not offer the model {job.model!r} "
                "(VOICE_SERVICE_WHISPER_MODELS differs between nodes); submit it again.",
            )
        try:
            transcriber = transcriber_for(
                runtime.engines, runtime.providers, job.language, job.model
            )
        except ApiError as exc:
            raise JobFailed(exc.code, exc.message) from None
        settings = runtime.settings
        made = runtime.pool.stream(
            Job(Capability.SPEECH_TO_TEXT, DECODER, batch=True),
            _pieces,
            path,
            NATIVE_POLICY.accepted,
            settings.job_max_audio_seconds,
        )
        under_way = _PiecesUnderWay(runtime, job.id, transcript, _window(transcriber))
        # The audio's refusals become API errors first, then the job's failure.
        with _as_job_failure(), audio_errors_as_api_errors("audio", NATIVE_POLICY):
            async with aclosing(made) as pieces, under_way:
                async for item in pieces:
                    if isinstance(item, Fraction):
                        transcript.duration = item
                    elif item.speech:
                        if transcript.language is None:  # the first speech sets it for all
                            await under_way.settle()
                        asked = replace(options, language=transcript.language)
                        told = _piece_told(runtime, transcriber, item, asked, speakers)
                        await under_way.add(item, told)
                    else:
                        await under_way.add(item, None)
                await under_way.settle()
                if speakers is not None:
                    await _diarized(runtime, job, transcript, speakers)
        runtime.metrics.count_audio(Capability.SPEECH_TO_TEXT, float(transcript.duration))
        return transcript
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _window(transcriber: LocalTranscriber | Provider) -> int:
    """Pieces transcribed at once: one on our own engines (the pool schedules the rest);
    through a provider, as many as it takes at once but one, left for requests."""
    if isinstance(transcriber, Provider):
        return max(1, transcriber.capacity - 1)
    return 1


class _PiecesUnderWay:
    """Pieces being transcribed, at most `window` at once, taken into the transcript (and
    the job's progress) in the order of the audio, whichever finishes first. Leaving the
    block cancels those still under way."""

    def __init__(self, runtime: Runtime, job_id: str, transcript: _Transcript, window: int) -> None:
        self._runtime, self._job_id = runtime, job_id
        self._transcript = transcript
        self._window = window
        self._pieces: deque[tuple[Piece, asyncio.Task[_PieceResult] | None]] = deque()

    async def __aenter__(self) -> _PiecesUnderWay:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        tasks = [task for _piece, task in self._pieces if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def add(self, piece: Piece, transcribing: _Transcribing | None) -> None:
        """A piece and its transcription (None: no speech in it); back once fewer than
        `window` are under way."""
        task = asyncio.create_task(transcribing) if transcribing is not None else None
        self._pieces.append((piece, task))
        while len(self._pieces) >= self._window:
            await self._take_oldest()

    async def settle(self) -> None:
        """Wait for every piece under way."""
        while self._pieces:
            await self._take_oldest()

    async def _take_oldest(self) -> None:
        piece, task = self._pieces[0]
        if task is not None:
            told = await task
            self._transcript.language = self._transcript.language or told.language
            self._transcript.segments.extend(told.segments)
            self._transcript.voiced.extend(told.voiced)
        self._pieces.popleft()
        await _progressed(self._runtime, self._job_id, piece.end / RATE)


@contextlib.contextmanager
def _as_job_failure() -> Iterator[None]:
    """What the audio and the engines refuse fails the job: it would fail again."""
    try:
        yield
    except ProviderError:
        raise  # an upstream or the pool failed this time: the queue tries again
    except ApiError as exc:
        raise JobFailed(exc.code, exc.message) from None
    except EngineError as exc:
        logger.error("transcription job engine failure: %r", exc)
        raise JobFailed(
            "provider_error", "The transcription engine failed on this audio."
        ) from None


def _pieces(path: Path, accepted: AcceptedAudio, max_seconds: float) -> Iterator[Piece | Fraction]:
    """The audio's pieces as they are decoded, then its exact duration."""
    cutter = PieceCutter()
    duration = Fraction(0)
    fmt = identify_audio(path, accepted)
    for chunk, decoded in decode_chunks(path, max_seconds=max_seconds, fmt=fmt):
        yield from cutter.add(chunk)
        duration = decoded
    yield from cutter.finish()
    yield duration


async def _piece_told(
    runtime: Runtime,
    transcriber: LocalTranscriber | Provider,
    piece: Piece,
    options: TranscribeOptions,
    speakers: SpeakerHints | None,
) -> _PieceResult:
    """The piece's transcript, and its voiced segments where the job is diarized (on a
    worker of their own where one is free)."""
    async with asyncio.TaskGroup() as both:
        transcribing = both.create_task(_piece_transcript(runtime, transcriber, piece, options))
        if speakers is not None:
            voiced = await runtime.pool.run(
                Job(Capability.SPEECH_TO_TEXT, DIARIZER, batch=True),
                _diarizer(runtime).voiced,
                piece.samples,
                piece.start_seconds,
            )
        else:
            voiced = VoicedSegments()
    language, segments = transcribing.result()
    return _PieceResult(language, segments, voiced)


def _diarizer(runtime: Runtime) -> Diarizer:
    assert runtime.engines is not None and runtime.engines.diarizer is not None
    return runtime.engines.diarizer


async def _diarized(
    runtime: Runtime, job: TranscriptionJob, transcript: _Transcript, speakers: SpeakerHints
) -> None:
    """Name the speaker of each segment (and word) of the whole transcript, once every
    piece's voiced segments are in; words go again unless the job asked for them."""
    diarizer = _diarizer(runtime)
    turns = await runtime.pool.run(
        Job(Capability.SPEECH_TO_TEXT, DIARIZER, batch=True),
        diarizer.turns_of,
        transcript.voiced,
        float(transcript.duration),
        speakers,
    )
    segments = attributed(transcript.segments, turns)
    if not job.word_timestamps:
        segments = [replace(segment, words=()) for segment in segments]
    transcript.segments = segments


async def _piece_transcript(
    runtime: Runtime,
    transcriber: LocalTranscriber | Provider,
    piece: Piece,
    options: TranscribeOptions,
) -> tuple[str | None, list[Segment]]:
    """The piece's language and segments, timed from the start of the whole audio."""
    seconds = piece.samples.size / RATE
    if isinstance(transcriber, Provider):
        upload = AudioFile("piece.wav", wav_of(piece.samples, RATE), "audio/wav")
        remote = await transcriber.transcribe(upload, options, seconds)
        return remote.language, [_shifted(s, piece.start_seconds) for s in remote.segments]
    audio = DecodedAudio(piece.samples, RATE, Fraction(piece.samples.size, RATE))
    made = runtime.pool.stream(
        Job(Capability.SPEECH_TO_TEXT, transcriber.name, batch=True),
        local_transcript_parts,
        transcriber.engine,
        audio,
        NATIVE_POLICY.accepted,
        options,
        runtime.settings.job_max_audio_seconds,
        runtime.inference_budget,
    )
    language: str | None = None
    segments: list[Segment] = []
    async with aclosing(made) as parts:
        async for part in parts:
            if isinstance(part, AudioInfo):
                language = part.language
            else:
                segments.append(_shifted(part, piece.start_seconds))
    return language, segments


def _shifted(segment: Segment, offset: float) -> Segment:
    words = tuple(Word(w.word, w.start + offset, w.end + offset) for w in segment.words)
    return replace(segment, start=segment.start + offset, end=segment.end + offset, words=words)


async def _progressed(runtime: Runtime, job_id: str, done_seconds: float) -> None:
    async with transaction(runtime.sessions) as session:
        status = await repository.progressed(session, job_id, done_seconds)
    if status is not JobStatus.PROCESSING:
        raise _Cancelled()


async def _complete(
    runtime: Runtime, webhooks: SqlQueue, job: TranscriptionJob, transcript: _Transcript
) -> None:
    charge = Charge(job.endpoint, billed_seconds(transcript.duration))
    result = transcript_json(transcript.language, transcript.segments, job.word_timestamps)
    now = runtime.books.clock()
    async with transaction(runtime.sessions) as session:
        billed = await repository.complete(session, job, result, transcript.language, charge, now)
        if billed:
            event = WebhookEvent.TRANSCRIPTION_COMPLETED
            await announce(session, webhooks, job, event, now, units=charge.units)
    if billed:
        runtime.metrics.count_usage(charge.endpoint, charge.units, job.org_id)
        await audio_let_go(runtime, job)


async def fail_job(
    runtime: Runtime, webhooks: SqlQueue, job: TranscriptionJob, code: str, message: str
) -> bool:
    """Settle a job under way as failed, billed nothing, and tell its webhooks; False if
    it had ended already."""
    now = runtime.books.clock()
    async with transaction(runtime.sessions) as session:
        failed = await repository.fail(session, job, code, message, now)
        if failed:
            error = {"code": code, "message": message}
            await announce(
                session, webhooks, job, WebhookEvent.TRANSCRIPTION_FAILED, now, error=error
            )
    if failed:
        await audio_let_go(runtime, job)
    return failed


def transcript_json(
    language: str | None, segments: list[Segment], word_timestamps: bool
) -> dict[str, Any]:
    """A completed job's transcript as it is kept (and answered)."""
    return {
        "text": " ".join(segment.text.strip() for segment in segments).strip(),
        "language": language,
        "segments": [segment_fields(segment, word_timestamps) for segment in segments],
    }
