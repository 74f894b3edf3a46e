from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from voice_service.auth.principal import Principal
from voice_service.deps import Context, require_service
from voice_service.schemas import error_responses, json_request_body, parse_json
from voice_service.speech.schemas import SpeechRequest
from voice_service.speech.service import ENDPOINT, synthesize_speech

router = APIRouter(tags=["speech"])


@router.post(
    "/text-to-speech",
    summary="Generate speech (MP3) from text",
    response_class=Response,
    responses={
        200: {
            "description": "MP3 audio.",
            "content": {"audio/mpeg": {"schema": {"type": "string", "format": "binary"}}},
        },
        **error_responses(400, 404, 502),
    },
    openapi_extra=json_request_body(SpeechRequest),
)
async def text_to_speech(
    request: Request,
    context: Context,
    principal: Annotated[Principal, Depends(require_service(ENDPOINT))],
) -> Response:
    body = await parse_json(request, SpeechRequest)
    audio = await synthesize_speech(context, principal, request.state.record, body)
    return Response(audio, media_type="audio/mpeg")
