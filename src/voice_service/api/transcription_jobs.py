"""/transcription-jobs: long recordings transcribed in the background (jobs/)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi import Path as PathParam

from voice_service.api.webhooks import DeliveryId
from voice_service.audio.formats import NATIVE_AUDIO
from voice_service.audio.policy import NATIVE_POLICY
from voice_service.books.idempotency.fingerprint import fingerprint
from voice_service.books.idempotency.keys import HEADER as IDEMPOTENCY_HEADER
from voice_service.books.ledger import Ledger
from voice_service.core.errors import InvalidRequest, NotFound, PayloadTooLarge
from voice_service.core.models import SigningSecret, TranscriptionJob
from voice_service.core.vocabulary import Scope, Service, UsageEndpoint, megabytes
from voice_service.jobs import repository
from voice_service.jobs.schemas import (
    EXAMPLE_JOB_ID,
    WEBHOOK_URL,
    JobFromUrl,
    TranscriptionJobList,
    TranscriptionJobOut,
)
from voice_service.jobs.service import JobOptions, cancel_or_delete, submit_job
from voice_service.jobs.transcripts import MEDIA_TYPES, transcript_file
from voice_service.jobs.worker import JobWorkers
from voice_service.kit.db import transaction
from voice_service.kit.outbound import OutboundPolicy
from voice_service.kit.paging import UnknownCursor
from voice_service.tenancy.principal import Principal
from voice_service.transcription.fields import (
    SPEAKER_FIELDS,
    SPEAKER_FORM_FIELDS,
    flag,
    speaker_hints,
    word_timestamps,
)
from voice_service.transcription.known_speakers import (
    KNOWN_SPEAKER_FORM_FIELDS,
    MAX_KNOWN_SPEAKERS,
    MAX_REFERENCE_BYTES,
    NAMES,
    REFERENCES,
    Clip,
    known_voices,
    named_people,
)
from voice_service.transcription.service import known_languages, parse_language
from voice_service.web.context import AppContext
from voice_service.web.deps import Authenticated, Context, RequestLedger, check_scope
from voice_service.web.idempotency import claim_idempotency_key, request_target
from voice_service.web.schemas import error_responses, multipart_request_body, parse_json_body
from voice_service.web.uploads import NAMED_PEOPLE_FIELDS, receive_from_url, receive_large_upload
from voice_service.webhooks import repository as webhooks
from voice_service.webhooks.schemas import DeliveryList, DeliveryOut
from voice_service.webhooks.service import checked_url, redeliver

router = APIRouter(tags=["transcription jobs"])

# A URL and options, and the data URLs of the people it names.
MAX_JSON_BYTES = 16 * 1024 + MAX_KNOWN_SPEAKERS * MAX_REFERENCE_BYTES
MAX_URL_LENGTH = 2048


PATH = "/transcription-jobs"
_ENDPOINTS = {
    UsageEndpoint.SPEECH_TO_TEXT.value: (Scope.SPEECH_TO_TEXT, Service.SPEECH_TO_TEXT),
    UsageEndpoint.ASR.value: (Scope.ASR, Service.ASR),
}
_BODY = multipart_request_body(
    {
        "file": {
            "type": "string",
            "format": "binary",
            "description": f"Audio: {NATIVE_AUDIO.text}; checked by content; at most the "
            "job upload limit (VOICE_SERVICE_JOB_MAX_UPLOAD_BYTES, 1 GiB by default) and "
            "VOICE_SERVICE_JOB_MAX_AUDIO_SECONDS of audio (4 h).",
        },
        "language": {
            "type": "string",
            "description": "ISO 639-1 hint (e.g. en). Omit it to detect the language from "
            "the first speech.",
            "examples": ["en"],
        },
        "timestamps": {
            "type": "string",
            "enum": ["segment", "word"],
            "description": "segment (default): each segment's start and end; word: each "
            "word's too.",
        },
        **SPEAKER_FORM_FIELDS,
        **KNOWN_SPEAKER_FORM_FIELDS,
        "keep_audio": {
            "type": "boolean",
            "description": "Keep the audio once the job has ended (default false: deleted).",
        },
        "billed_as": {
            "type": "string",
            "enum": list(_ENDPOINTS),
            "description": "The usage endpoint the job is billed under, and the key scope it "
            "needs (default speech-to-text).",
        },
        "webhook_url": {"type": "string", "description": WEBHOOK_URL},
    },
    required=["file"],
)
# The other way to name the audio: a URL, in a JSON body.
_BODY["requestBody"]["content"]["application/json"] = {
    "schema": JobFromUrl.model_json_schema(),
    "examples": {
        "a meeting": {
            "value": {"url": "https://example.com/meetings/2026-11-25.mp3", "language": "en"}
        }
    },
}
JobId = Annotated[str, PathParam(openapi_examples={"a job": {"value": EXAMPLE_JOB_ID}})]


async def _jobs_reader(principal: Authenticated) -> Principal:
    """A key that may transcribe (either scope) may see and cancel its organization's jobs."""
    if principal.missing_scope_message(Scope.ASR) is not None:
        check_scope(principal, Scope.SPEECH_TO_TEXT)
    return principal


JobsReader = Annotated[Principal, Depends(_jobs_reader)]


def _workers(context: Context) -> JobWorkers:
    assert context.jobs is not None
    return context.jobs


@router.post(
    PATH,
    summary="Submit a recording to transcribe in the background",
    status_code=202,
    response_model=TranscriptionJobOut,
    responses=error_responses(400, 409, 413, 415),
    openapi_extra=_BODY,
)
async def submit(
    request: Request,
    response: Response,
    context: Context,
    ledger: RequestLedger,
    principal: Authenticated,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_HEADER,
            description="The same key with the same upload within 24 h answers the same job.",
        ),
    ] = None,
) -> TranscriptionJobOut:
    claim = _Claim(request, context, ledger, principal, idempotency_key)
    if request.headers.get("content-type", "").lower().startswith("application/json"):
        body = await _small_body(request)
        items = _url_fields(body)
        asked = await _asked(context, principal, items)
        await claim.run(fingerprint("POST", request_target(request), "application/json", body))
        options = await asked.heard(context)
        settings = context.settings
        async with receive_from_url(
            OutboundPolicy(settings.outbound_allowed),
            dict(items)["url"],
            context.uploads_dir,
            settings.job_max_upload_bytes,
            settings.job_fetch_timeout_seconds,
        ) as fetched:
            queue = _workers(context).queue
            job = await submit_job(context, queue, ledger, fetched.path, fetched.size, options)
    else:
        async with receive_large_upload(
            request, request_target(request), context.uploads_dir, NAMED_PEOPLE_FIELDS
        ) as upload:
            limit = context.settings.job_max_upload_bytes
            if upload.size > limit:
                raise PayloadTooLarge(f"file: the file exceeds the {megabytes(limit)} limit.")
            asked = await _asked(context, principal, upload.items)
            await claim.run(upload.fingerprint)
            options = await asked.heard(context)
            queue = _workers(context).queue
            job = await submit_job(context, queue, ledger, upload.path, upload.size, options)
    response.headers["Location"] = f"{request.url.path}/{job.id}"
    return TranscriptionJobOut.of(job)


@dataclass(frozen=True, slots=True)
class _Claim:
    """The request's Idempotency-Key, claimed once its fingerprint is known."""

    request: Request
    context: AppContext
    ledger: Ledger
    principal: Principal
    key: str | None

    async def run(self, digest: str) -> None:
        if self.key is not None:
            await claim_idempotency_key(
                self.request, self.context, self.ledger, self.principal, self.key, digest
            )


@dataclass(frozen=True, slots=True)
class _Asked:
    """A job's options, checked; the people it names are heard (their clips decoded and
    embedded, on a worker) only once its Idempotency-Key is claimed, not for a replay."""

    options: JobOptions
    clips: Sequence[Clip]

    async def heard(self, context: AppContext) -> JobOptions:
        speakers = self.options.speakers
        if speakers is None or not self.clips:
            return self.options
        known = await known_voices(context, self.clips, NATIVE_POLICY.accepted)
        return replace(self.options, speakers=replace(speakers, known=known))


async def _asked(
    context: AppContext, principal: Principal, items: Sequence[tuple[str, str]]
) -> _Asked:
    """The job's options from its form's fields (each name's last value; the people it
    names, every value), checked."""
    fields = dict(items)
    billed_as = fields.get("billed_as", UsageEndpoint.SPEECH_TO_TEXT.value)
    if billed_as not in _ENDPOINTS:
        raise InvalidRequest(f"billed_as: one of {', '.join(_ENDPOINTS)}.", param="billed_as")
    check_scope(principal, *_ENDPOINTS[billed_as])
    speakers = speaker_hints(fields)
    clips = await named_people(
        context,
        principal.org_id,
        lambda name: [value for key, value in items if key == name],
        diarized=speakers is not None,
        needs="diarize=true",
    )
    options = JobOptions(
        language=parse_language(fields.get("language"), known_languages(context)),
        word_timestamps=word_timestamps(fields.get("timestamps")),
        speakers=speakers,
        keep_audio=flag(fields.get("keep_audio"), "keep_audio"),
        endpoint=UsageEndpoint(billed_as),
        webhook_url=await _webhook_url(context, principal, fields.get("webhook_url") or None),
    )
    return _Asked(options, clips)


async def _webhook_url(context: AppContext, principal: Principal, url: str | None) -> str | None:
    """A job's own receiver: a URL deliveries may go to, and a secret to sign them with."""
    if url is None:
        return None
    if len(url) > MAX_URL_LENGTH:
        raise InvalidRequest(
            f"webhook_url: at most {MAX_URL_LENGTH} characters.", param="webhook_url"
        )
    await checked_url(context.settings.outbound_allowed, url, param="webhook_url")
    async with context.sessions() as session:
        if await session.get(SigningSecret, principal.org_id) is None:
            raise InvalidRequest(
                "webhook_url: the organization has no signing secret to sign its deliveries "
                "with; create it first (POST /api/v1/webhooks/signing-secret).",
                param="webhook_url",
            )
    return url


async def _small_body(request: Request) -> bytes:
    """A JSON body: a URL and options, never large."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_JSON_BYTES:
            raise PayloadTooLarge(f"A JSON body is at most {MAX_JSON_BYTES} bytes.")
    return bytes(body)


def _url_fields(body: bytes) -> list[tuple[str, str]]:
    """The JSON body's fields as the multipart form would give them."""
    given = parse_json_body(body, JobFromUrl)
    fields = [("url", given.url)]
    for name in ("language", "timestamps", "billed_as", "webhook_url", *SPEAKER_FIELDS):
        value = getattr(given, name)
        if value is not None:
            fields.append((name, str(value)))
    for name in ("keep_audio", "diarize"):
        fields.append((name, "true" if getattr(given, name) else "false"))
    fields += [(NAMES, name) for name in given.known_speaker_names]
    fields += [(REFERENCES, reference) for reference in given.known_speaker_references]
    return fields


@router.get(
    PATH,
    summary="The organization's transcription jobs, newest first",
    response_model=TranscriptionJobList,
    responses=error_responses(400),
)
async def list_jobs(
    context: Context,
    principal: JobsReader,
    limit: Annotated[
        int,
        Query(ge=1, le=200, description="Jobs per page.", openapi_examples={"20": {"value": 20}}),
    ] = 50,
    before: Annotated[
        str | None, Query(max_length=40, description="A job id: the page starts after it.")
    ] = None,
) -> TranscriptionJobList:
    async with context.sessions() as session:
        try:
            page = await repository.page_jobs(session, principal.org_id, limit=limit, before=before)
        except UnknownCursor:
            raise InvalidRequest(f"before: no job {before!r} in this organization.") from None
    return TranscriptionJobList(
        jobs=[TranscriptionJobOut.of(job, with_result=False) for job in page.jobs],
        next=page.next,
    )


@router.get(
    PATH + "/{job_id}",
    summary="One transcription job: its status, progress and, once completed, transcript",
    response_model=TranscriptionJobOut,
    responses={
        **error_responses(400, 404),
        200: {
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "application/x-subrip": {"schema": {"type": "string"}},
                "text/vtt": {"schema": {"type": "string"}},
            }
        },
    },
)
async def get_job(
    job_id: JobId,
    context: Context,
    principal: JobsReader,
    format: Annotated[
        Literal["json", "srt", "vtt", "text"],
        Query(description="json (the job), or its transcript as srt, vtt or text."),
    ] = "json",
) -> TranscriptionJobOut | Response:
    job = await _find(context, principal, job_id)
    if format == "json":
        return TranscriptionJobOut.of(job)
    if job.result is None:
        raise InvalidRequest(
            f"format: the job is {job.status}; its transcript exists once it has completed.",
            param="format",
        )
    transcript = TranscriptionJobOut.of(job).result
    assert transcript is not None
    return Response(transcript_file(transcript, format), media_type=MEDIA_TYPES[format])


@router.delete(
    PATH + "/{job_id}",
    summary="Cancel a job under way, or delete one that has ended with its audio and transcript",
    response_model=TranscriptionJobOut,
    responses={
        **error_responses(404),
        200: {
            "description": "It was under way when asked: cancelled (by this request or one "
            "beside it) and kept, or ended meanwhile; the job as it is now."
        },
        204: {"description": "It had ended: deleted."},
    },
)
async def delete_job(job_id: JobId, context: Context, principal: JobsReader) -> Response:
    # The job as this request finds it decides: under way, it is cancelled and kept.
    job = await _find(context, principal, job_id)
    cancelled = await cancel_or_delete(context, _workers(context).queue, job)
    if cancelled is None:
        return Response(status_code=204)
    body = TranscriptionJobOut.of(cancelled).model_dump_json()
    return Response(body, media_type="application/json")


@router.get(
    PATH + "/{job_id}/deliveries",
    summary="What the organization's webhooks and the job's own webhook_url were told of it",
    response_model=DeliveryList,
    responses=error_responses(404),
)
async def job_deliveries(job_id: JobId, context: Context, principal: JobsReader) -> DeliveryList:
    await _find(context, principal, job_id)
    async with context.sessions() as session:
        found = await webhooks.job_deliveries(session, principal.org_id, job_id)
    return DeliveryList(deliveries=[DeliveryOut.of(d, attempts) for d, attempts in found])


@router.post(
    PATH + "/{job_id}/deliveries/{delivery_id}/redeliver",
    summary="Send one of the job's deliveries again (with its retries, should it fail)",
    status_code=202,
    response_model=DeliveryOut,
    responses=error_responses(404),
)
async def redeliver_job_delivery(
    job_id: JobId,
    delivery_id: DeliveryId,
    context: Context,
    principal: JobsReader,
) -> DeliveryOut:
    assert context.deliveries is not None
    await _find(context, principal, job_id)
    async with transaction(context.sessions) as session:
        delivery = await webhooks.find_delivery(
            session, principal.org_id, delivery_id, job_id=job_id
        )
        if delivery is None:
            raise NotFound(f"No delivery with id {delivery_id!r} of this job.")
        await redeliver(session, context.deliveries.queue, delivery)
        return DeliveryOut.of(*await webhooks.with_attempts(session, delivery))


async def _find(context: Context, principal: Principal, job_id: str) -> TranscriptionJob:
    async with context.sessions() as session:
        job = await repository.find_job(session, principal.org_id, job_id)
    if job is None:
        # The same answer for another organization's job and an unknown one.
        raise NotFound(f"No transcription job with id {job_id!r}.")
    return job
