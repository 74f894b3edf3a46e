"""The service's words, each defined once: the services an account or organization can have
switched off, the scopes of API keys, the endpoints usage is billed under, the capabilities
the inference pool queues by, and the upload limit as a person reads it."""

from __future__ import annotations

from enum import StrEnum


class Service(StrEnum):
    """What an operator can disable for an account or an organization (`orgs disable`)."""

    TEXT_TO_SPEECH = "text-to-speech"
    SPEECH_TO_TEXT = "speech-to-text"  # transcription and translation, on both APIs
    ASR = "asr"
    CLONING = "cloning"


class Scope(StrEnum):
    """What an API key may do (`keys create --scopes`); a key made without scopes may do
    everything, including what later scopes will cover."""

    TEXT_TO_SPEECH = "text-to-speech"
    SPEECH_TO_TEXT = "speech-to-text"  # transcription and translation, on both APIs
    ASR = "asr"
    VOICES_READ = "voices:read"
    VOICES_WRITE = "voices:write"  # cloning and deleting clones
    USAGE_READ = "usage:read"  # /usage and /requests
    WEBHOOKS = "webhooks"  # registering webhooks and reading their deliveries


class UsageEndpoint(StrEnum):
    """What a usage row is billed under, in the order usage is listed everywhere."""

    TEXT_TO_SPEECH = "text-to-speech"
    SPEECH_TO_TEXT = "speech-to-text"
    ASR = "asr"
    TRANSLATION = "translation"
    CLONE = "voices/clone"
    REALTIME = "realtime"  # live transcription: seconds of audio received


class Capability(StrEnum):
    """What an inference pool job does; each has its own queue (`admission`)."""

    TEXT_TO_SPEECH = "text-to-speech"
    SPEECH_TO_TEXT = "speech-to-text"  # transcription and translation, both APIs
    CLONING = "cloning"  # analysing a clone's sample (a clone's speech is text-to-speech)


def megabytes(size: int) -> str:
    """`size` bytes as the API's messages state a limit: "25 MB" for 25 MiB."""
    return f"{size / (1024 * 1024):g} MB"


class JobStatus(StrEnum):
    """Where a transcription job is: queued → processing → completed | failed, or cancelled."""

    QUEUED = "queued"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED)


class WebhookEvent(StrEnum):
    """What a webhook may be told of."""

    TRANSCRIPTION_COMPLETED = "transcription.completed"
    TRANSCRIPTION_FAILED = "transcription.failed"
