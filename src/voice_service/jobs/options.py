"""A job's options, from its form's fields: checked when it is submitted, and the people
it names heard once its Idempotency-Key is claimed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from voice_service.audio.policy import NATIVE_POLICY
from voice_service.core.errors import InvalidRequest
from voice_service.core.vocabulary import UsageEndpoint
from voice_service.engines.diarization import SpeakerHints
from voice_service.runtime import Runtime
from voice_service.transcription.fields import flag, speaker_hints, word_timestamps
from voice_service.transcription.known_speakers import Clip, known_voices, named_people
from voice_service.transcription.service import (
    known_languages,
    offered_models,
    parse_language,
    parse_model,
)
from voice_service.webhooks.endpoints import signing_secret
from voice_service.webhooks.schemas import MAX_URL_LENGTH
from voice_service.webhooks.service import checked_url


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A submission as its surface read it: the usage endpoint it is billed under (the
    surface has checked the key may use it) and its form's other fields, unchecked."""

    endpoint: UsageEndpoint
    items: Sequence[tuple[str, str]]  # in order, a repeated name repeated

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.items if key == name]


@dataclass(frozen=True, slots=True)
class JobOptions:
    language: str | None  # None: detected from the first speech
    model: str | None  # None: the default model of the node that runs it
    word_timestamps: bool
    speakers: SpeakerHints | None  # told apart, with these hints; None: not asked
    keep_audio: bool
    endpoint: UsageEndpoint  # what its usage is billed under
    webhook_url: str | None  # told when it ends, besides the organization's webhooks


@dataclass(frozen=True, slots=True)
class AskedOptions:
    """A job's options, checked; the people it names are heard (their clips decoded and
    embedded, on a worker) only once its Idempotency-Key is claimed, not for a replay."""

    options: JobOptions
    clips: Sequence[Clip]

    async def heard(self, runtime: Runtime) -> JobOptions:
        """The options, with the people they name heard."""
        speakers = self.options.speakers
        if speakers is None or not self.clips:
            return self.options
        known = await known_voices(runtime, self.clips, NATIVE_POLICY.accepted)
        return replace(self.options, speakers=replace(speakers, known=known))


async def asked_options(runtime: Runtime, org_id: str, request: JobRequest) -> AskedOptions:
    """The job's options from its fields (each name's last value; the people it names,
    every value), checked."""
    fields = dict(request.items)
    speakers = speaker_hints(fields)
    clips = await named_people(
        runtime, org_id, request.values, diarized=speakers is not None, needs="diarize=true"
    )
    options = JobOptions(
        language=parse_language(fields.get("language"), known_languages(runtime)),
        model=parse_model(fields.get("model_id"), offered_models(runtime), "model_id"),
        word_timestamps=word_timestamps(fields.get("timestamps")),
        speakers=speakers,
        keep_audio=flag(fields.get("keep_audio"), "keep_audio"),
        endpoint=request.endpoint,
        webhook_url=await _webhook_url(runtime, org_id, fields.get("webhook_url") or None),
    )
    return AskedOptions(options, clips)


async def _webhook_url(runtime: Runtime, org_id: str, url: str | None) -> str | None:
    """A job's own receiver: a URL deliveries may go to, and a secret to sign them with."""
    if url is None:
        return None
    if len(url) > MAX_URL_LENGTH:
        raise InvalidRequest(
            f"webhook_url: at most {MAX_URL_LENGTH} characters.", param="webhook_url"
        )
    await checked_url(runtime.settings.outbound_allowed, url, param="webhook_url")
    if await signing_secret(runtime, org_id) is None:
        raise InvalidRequest(
            "webhook_url: the organization has no signing secret to sign its deliveries "
            "with; create it first (POST /api/v1/webhooks/signing-secret).",
            param="webhook_url",
        )
    return url
