from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from voice_service.audio.formats import NATIVE_AUDIO
from voice_service.books.ledger import Ledger
from voice_service.core.vocabulary import Scope, Service, UsageEndpoint
from voice_service.engines.protocols import TranscribeOptions
from voice_service.tenancy.principal import Principal
from voice_service.transcription.fields import SPEAKER_FORM_FIELDS, speaker_hints, word_timestamps
from voice_service.transcription.known_speakers import (
    KNOWN_SPEAKER_FORM_FIELDS,
    named_people,
)
from voice_service.transcription.schemas import Transcript, TranscriptSegment, segment_fields
from voice_service.transcription.service import (
    known_languages,
    offered_models,
    parse_language,
    parse_model,
    transcribe_upload,
)
from voice_service.web.deps import Context, IdempotencyKey, RequestLedger, require
from voice_service.web.schemas import error_responses, multipart_request_body
from voice_service.web.uploads import NAMED_PEOPLE_FIELDS, receive_upload

router = APIRouter(tags=["transcription"])

_BODY = multipart_request_body(
    {
        "file": {
            "type": "string",
            "format": "binary",
            "description": f"Audio: {NATIVE_AUDIO.text}; checked by content; "
            "at most the upload limit (413).",
        },
        "language": {
            "type": "string",
            "description": "ISO 639-1 hint (e.g. en). Omit it to detect the language.",
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
            "description": "Adds `segments`: each with its start and end (segment), and its "
            "words' too (word).",
        },
        **SPEAKER_FORM_FIELDS,
        **KNOWN_SPEAKER_FORM_FIELDS,
    },
    required=["file"],
)
_RESPONSES = error_responses(400, 413, 415, 502)


async def _transcribe(
    request: Request, context: Context, ledger: Ledger, endpoint: str
) -> Transcript:
    async with receive_upload(
        request, context.settings.max_upload_bytes, context.uploads_dir, NAMED_PEOPLE_FIELDS
    ) as upload:
        fields = upload.fields
        language = parse_language(fields.get("language"), known_languages(context))
        model = parse_model(fields.get("model_id"), offered_models(context), "model_id")
        timed = bool(fields.get("timestamps"))
        words = word_timestamps(fields.get("timestamps"))
        speakers = speaker_hints(fields)
        assert ledger.principal is not None
        known = await named_people(
            context,
            ledger.principal.org_id,
            upload.values,
            diarized=speakers is not None,
            needs="diarize=true",
        )
        transcript = await transcribe_upload(
            context,
            ledger,
            endpoint,
            upload.path,
            TranscribeOptions(
                language=language, timestamps=timed, word_timestamps=words, model=model
            ),
            speakers=speakers,
            known=known,
        )
    answer = Transcript(
        text=transcript.text, language=transcript.info.language, request_id=ledger.request_id
    )
    if timed or speakers is not None:
        answer.segments = [
            TranscriptSegment.model_validate(segment_fields(segment, words))
            for segment in transcript.segments
        ]
    return answer


@router.post(
    "/speech-to-text",
    summary="Transcribe an audio file",
    response_model=Transcript,
    response_model_exclude_unset=True,
    responses=_RESPONSES,
    openapi_extra=_BODY,
)
async def speech_to_text(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    _: Annotated[Principal, Depends(require(Scope.SPEECH_TO_TEXT, Service.SPEECH_TO_TEXT))],
    _idempotent: IdempotencyKey,
) -> Transcript:
    return await _transcribe(request, context, ledger, UsageEndpoint.SPEECH_TO_TEXT)


@router.post(
    "/asr",
    summary="Transcribe an audio file (usage recorded under ASR)",
    response_model=Transcript,
    response_model_exclude_unset=True,
    responses=_RESPONSES,
    openapi_extra=_BODY,
)
async def asr(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    _: Annotated[Principal, Depends(require(Scope.ASR, Service.ASR))],
    _idempotent: IdempotencyKey,
) -> Transcript:
    return await _transcribe(request, context, ledger, UsageEndpoint.ASR)
