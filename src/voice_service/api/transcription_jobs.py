"""/transcription-jobs: long recordings transcribed in the background (jobs/)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi import Path as PathParam

from voice_service.api.webhooks import DeliveryId
from voice_service.audio.formats import NATIVE_AUDIO
from voice_service.books.idempotency.fingerprint import fingerprint
from voice_service.books.idempotency.keys import HEADER as IDEMPOTENCY_HEADER
from voice_service.books.ledger import Ledger
from voice_service.core.errors import InvalidRequest, PayloadTooLarge
from voice_service.core.vocabulary import Scope, Service, UsageEndpoint, megabytes
from voice_service.jobs import deliveries
from voice_service.jobs.options import JobRequest
from voice_service.jobs.reading import job_of, page_of_jobs, transcript_of
from voice_service.jobs.schemas import (
    EXAMPLE_JOB_ID,
    WEBHOOK_URL,
    JobFromUrl,
    TranscriptionJobList,
    TranscriptionJobOut,
)
from voice_service.jobs.service import cancel_or_delete
from voice_service.jobs.submission import AudioFile, Claim, submit_from_url, submit_upload
from voice_service.jobs.transcripts import MEDIA_TYPES, transcript_file
from voice_service.jobs.worker import JobWorkers
from voice_service.tenancy.principal import Principal
from voice_service.transcription.fields import SPEAKER_FIELDS, SPEAKER_FORM_FIELDS
from voice_service.transcription.known_speakers import (
    KNOWN_SPEAKER_FORM_FIELDS,
    MAX_KNOWN_SPEAKERS,
    MAX_REFERENCE_BYTES,
    NAMES,
    REFERENCES,
)
from voice_service.web.context import AppContext
from voice_service.web.deps import Authenticated, Context, RequestLedger, check_scope
from voice_service.web.idempotency import claim_idempotency_key, request_target
from voice_service.web.schemas import error_responses, multipart_request_body, parse_json_body
from voice_service.web.uploads import NAMED_PEOPLE_FIELDS, receive_large_upload
from voice_service.webhooks.schemas import DeliveryList, DeliveryOut

router = APIRouter(tags=["transcription jobs"])

# A URL and options, and the data URLs of the people it names.
MAX_JSON_BYTES = 16 * 1024 + MAX_KNOWN_SPEAKERS * MAX_REFERENCE_BYTES


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
        "model_id": {
            "type": "string",
            "description": "One of the node's transcription models (GET /models lists "
            "them); omit it for the default.",
            "examples": ["large-v3-turbo"],
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
    queue = _workers(context).queue
    if request.headers.get("content-type", "").lower().startswith("application/json"):
        body = await _small_body(request)
        url, items = _url_fields(body)
        asked = _job_request(principal, items)
        digest = fingerprint("POST", request_target(request), "application/json", body)
        claim = _claim(request, context, ledger, idempotency_key, digest)
        job = await submit_from_url(context, queue, ledger, asked, url, claim=claim)
    else:
        async with receive_large_upload(
            request, request_target(request), context.uploads_dir, NAMED_PEOPLE_FIELDS
        ) as upload:
            limit = context.settings.job_max_upload_bytes
            if upload.size > limit:
                raise PayloadTooLarge(f"file: the file exceeds the {megabytes(limit)} limit.")
            asked = _job_request(principal, upload.items)
            claim = _claim(request, context, ledger, idempotency_key, upload.fingerprint)
            audio = AudioFile(upload.path, upload.size)
            job = await submit_upload(context, queue, ledger, asked, audio, claim=claim)
    response.headers["Location"] = f"{request.url.path}/{job.id}"
    return TranscriptionJobOut.of(job)


def _claim(
    request: Request, context: AppContext, ledger: Ledger, key: str | None, digest: str
) -> Claim:
    """Claim the request's Idempotency-Key, if it has one, when the job's options pass."""

    async def claim() -> None:
        if key is not None:
            await claim_idempotency_key(request, context, ledger, key, digest)

    return claim


def _job_request(principal: Principal, items: Sequence[tuple[str, str]]) -> JobRequest:
    """The form's fields, with the endpoint the job is billed under, which the key must
    have the scope for."""
    billed_as = dict(items).get("billed_as", UsageEndpoint.SPEECH_TO_TEXT.value)
    if billed_as not in _ENDPOINTS:
        raise InvalidRequest(f"billed_as: one of {', '.join(_ENDPOINTS)}.", param="billed_as")
    check_scope(principal, *_ENDPOINTS[billed_as])
    return JobRequest(UsageEndpoint(billed_as), items)


async def _small_body(request: Request) -> bytes:
    """A JSON body: a URL and options, never large."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_JSON_BYTES:
            raise PayloadTooLarge(f"A JSON body is at most {MAX_JSON_BYTES} bytes.")
    return bytes(body)


def _url_fields(body: bytes) -> tuple[str, list[tuple[str, str]]]:
    """The JSON body's URL, and its other fields as the multipart form would give them."""
    given = parse_json_body(body, JobFromUrl)
    fields: list[tuple[str, str]] = []
    fields_given = ("language", "model_id", "timestamps", "billed_as", "webhook_url")
    for name in (*fields_given, *SPEAKER_FIELDS):
        value = getattr(given, name)
        if value is not None:
            fields.append((name, str(value)))
    for name in ("keep_audio", "diarize"):
        fields.append((name, "true" if getattr(given, name) else "false"))
    fields += [(NAMES, name) for name in given.known_speaker_names]
    fields += [(REFERENCES, reference) for reference in given.known_speaker_references]
    return given.url, fields


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
    page = await page_of_jobs(context, principal.org_id, limit=limit, before=before)
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
    job = await job_of(context, principal.org_id, job_id)
    if format == "json":
        return TranscriptionJobOut.of(job)
    transcript = transcript_of(job, param="format")
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
    cancelled = await cancel_or_delete(context, _workers(context).queue, principal.org_id, job_id)
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
    found = await deliveries.job_deliveries(context, principal.org_id, job_id)
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
    queue = context.deliveries.queue
    redelivered = await deliveries.redeliver_job_delivery(
        context, queue, principal.org_id, job_id, delivery_id
    )
    return DeliveryOut.of(*redelivered)
