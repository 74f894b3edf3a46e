from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from voice_service.audio.encode import FORMATS, OutputFormat
from voice_service.auth.principal import Principal
from voice_service.deps import Context, IdempotencyKey, RequestLedger, require
from voice_service.schemas import error_responses, json_request_body, parse_json
from voice_service.speech.schemas import SpeechRequest
from voice_service.speech.service import stream_speech, synthesize_speech
from voice_service.streaming import MeteredStream
from voice_service.vocabulary import Scope, Service

router = APIRouter(tags=["speech"])

_MP3 = {"audio/mpeg": {"schema": {"type": "string", "format": "binary"}}}


@router.post(
    "/text-to-speech",
    summary="Generate speech (MP3) from text",
    response_class=Response,
    responses={
        200: {"description": "MP3 audio.", "content": _MP3},
        **error_responses(400, 404, 502),
    },
    openapi_extra=json_request_body(SpeechRequest),
)
async def text_to_speech(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    principal: Annotated[Principal, Depends(require(Scope.TEXT_TO_SPEECH, Service.TEXT_TO_SPEECH))],
    _idempotent: IdempotencyKey,
) -> Response:
    body = await parse_json(request, SpeechRequest)
    audio = await synthesize_speech(context, principal, ledger, body)
    return Response(audio, media_type="audio/mpeg")


@router.post(
    "/text-to-speech/stream",
    summary="Generate speech (MP3) from text, streamed as it is synthesized",
    description="The same request, errors, limits and units as /text-to-speech. The MP3 "
    "arrives with chunked transfer, its first bytes as soon as the first sentence is "
    "spoken. Errors found before the first byte get their status; a failure after it "
    "cuts the stream off (the connection closes without the final chunk). Billed only "
    "when the whole stream was handed to the server; the request log records what a "
    "stream that ended early delivered.",
    response_class=Response,
    responses={
        200: {"description": "MP3 audio, streamed.", "content": _MP3},
        **error_responses(400, 404, 502),
    },
    openapi_extra=json_request_body(SpeechRequest),
)
async def text_to_speech_stream(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    principal: Annotated[Principal, Depends(require(Scope.TEXT_TO_SPEECH, Service.TEXT_TO_SPEECH))],
    _idempotent: IdempotencyKey,
) -> MeteredStream:
    body = await parse_json(request, SpeechRequest)
    speech = await stream_speech(
        context, principal, ledger, body.voice_id, body.text, OutputFormat.MP3
    )
    return MeteredStream(
        speech.chunks,
        media_type=FORMATS[OutputFormat.MP3].media_type,
        ledger=ledger,
        charge=speech.charge,
    )
