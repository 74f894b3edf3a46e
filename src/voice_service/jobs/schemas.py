"""Transcription jobs as the API shows them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from voice_service.core.models import TranscriptionJob
from voice_service.core.vocabulary import JobStatus
from voice_service.transcription.known_speakers import KNOWN_SPEAKER_FORM_FIELDS, NAMES, REFERENCES
from voice_service.transcription.schemas import TranscriptSegment
from voice_service.voices.schemas import Timestamp

EXAMPLE_JOB_ID = "job_8d2e4f6a1b3c5d7e9f0a1b2c"
WEBHOOK_URL = (
    "Told when the job ends (transcription.completed or transcription.failed), signed with "
    "the organization's signing secret (POST /api/v1/webhooks/signing-secret): https, and a "
    "public address unless the operator allows the host."
)


class JobFromUrl(BaseModel):
    """A job's audio by URL, and its options (as the multipart form's fields)."""

    url: str = Field(
        max_length=2048,
        description="An https URL of the audio, fetched at once: a public address (unless the "
        "operator allows the host), same-host redirects only, within the job limits.",
        examples=["https://example.com/meetings/2026-11-25.mp3"],
    )
    language: str | None = Field(None, max_length=16, examples=["en"])
    model_id: str | None = Field(
        None, max_length=64, description="One of GET /models; omit it for the default."
    )
    timestamps: Literal["segment", "word"] | None = None
    keep_audio: bool = False
    diarize: bool = Field(False, description="Tell the speakers apart (as /speech-to-text).")
    num_speakers: int | None = Field(None, description="With diarize: exactly this many.")
    min_speakers: int | None = Field(None, description="With diarize: at least this many.")
    max_speakers: int | None = Field(None, description="With diarize: at most this many.")
    known_speaker_names: list[str] = Field(
        default_factory=list, description=KNOWN_SPEAKER_FORM_FIELDS[NAMES]["description"]
    )
    known_speaker_references: list[str] = Field(
        default_factory=list, description=KNOWN_SPEAKER_FORM_FIELDS[REFERENCES]["description"]
    )
    billed_as: Literal["speech-to-text", "asr"] | None = None
    webhook_url: str | None = Field(None, max_length=2048, description=WEBHOOK_URL)


class JobTranscript(BaseModel):
    text: str
    language: str | None = Field(description="Given, or detected from the first speech.")
    segments: list[TranscriptSegment]


class JobFailure(BaseModel):
    code: str = Field(examples=["UNSUPPORTED_MEDIA_TYPE"])
    message: str


class TranscriptionJobOut(BaseModel):
    id: str = Field(examples=[EXAMPLE_JOB_ID])
    status: JobStatus
    request_id: str = Field(description="The request that submitted it, in the request log.")
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    duration_seconds: float = Field(description="Of the audio, as decoded at submission.")
    progress_seconds: float = Field(
        description="Seconds of the audio transcribed so far (all of it once completed)."
    )
    language: str | None = Field(description="Asked for; once completed, the transcript's.")
    model_id: str | None = Field(description="The model asked for; null: the default.")
    timestamps: str = Field(description="segment, or word.")
    diarize: bool = Field(description="Its segments (and words) name their speakers.")
    num_speakers: int | None
    min_speakers: int | None
    max_speakers: int | None
    known_speaker_names: list[str] = Field(description="The people it names where heard.")
    billed_as: str = Field(description="The usage endpoint it is billed under, once completed.")
    units: int | None = Field(description="Units billed: null until it completes.")
    audio_kept: bool = Field(description="Its audio is still stored.")
    webhook_url: str | None = Field(description="Told when it ends, besides the webhooks.")
    error: JobFailure | None = Field(description="Why it failed.")
    result: JobTranscript | None = Field(description="The transcript, once completed.")

    @classmethod
    def of(cls, job: TranscriptionJob, *, with_result: bool = True) -> TranscriptionJobOut:
        failure = (
            JobFailure(code=job.error_code, message=job.error_message or "")
            if job.error_code is not None
            else None
        )
        result: dict[str, Any] | None = job.result if with_result else None
        hints = job.speakers or {}
        return cls(
            id=job.id,
            status=JobStatus(job.status),
            request_id=job.request_id,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            duration_seconds=float(job.duration_fraction),
            progress_seconds=job.done_seconds,
            language=job.language,
            model_id=job.model,
            timestamps="word" if job.word_timestamps else "segment",
            diarize=job.speakers is not None,
            num_speakers=hints.get("num_speakers"),
            min_speakers=hints.get("min_speakers"),
            max_speakers=hints.get("max_speakers"),
            known_speaker_names=[person["name"] for person in hints.get("known", ())],
            billed_as=job.endpoint,
            units=job.units,
            audio_kept=job.audio is not None,
            webhook_url=job.webhook_url,
            error=failure,
            result=JobTranscript.model_validate(result) if result is not None else None,
        )


class TranscriptionJobList(BaseModel):
    jobs: list[TranscriptionJobOut] = Field(description="Newest first, without their results.")
    next: str | None = Field(
        description="Pass as `before` for the next (older) page; null on the last page."
    )
