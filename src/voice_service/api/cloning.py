from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from voice_service.api.voice_paths import VOICE_PATH
from voice_service.audio.formats import NATIVE_AUDIO
from voice_service.cloning.schemas import (
    MAX_DESCRIPTION_LENGTH,
    MAX_NAME_LENGTH,
    ClonedVoice,
    DeletedVoice,
)
from voice_service.cloning.service import clone_voice, delete_voice, validate_clone_fields
from voice_service.core.vocabulary import Scope, Service
from voice_service.tenancy.principal import Principal
from voice_service.voices.listing import shown
from voice_service.web.deps import Context, IdempotencyKey, RequestLedger, require
from voice_service.web.schemas import error_responses, multipart_request_body
from voice_service.web.uploads import receive_upload

router = APIRouter(tags=["voices"])

_CLONE_BODY = multipart_request_body(
    {
        "name": {"type": "string", "maxLength": MAX_NAME_LENGTH, "examples": ["My voice"]},
        "consent": {
            "type": "string",
            "enum": ["true"],
            "description": "The literal text true: you may use this recording for cloning.",
        },
        "file": {
            "type": "string",
            "format": "binary",
            "description": f"A clear sample of one speaker: {NATIVE_AUDIO.text}; "
            "at most the upload limit (413).",
        },
        "description": {
            "type": "string",
            "maxLength": MAX_DESCRIPTION_LENGTH,
            "examples": ["Read slowly in a quiet room."],
        },
    },
    required=["name", "consent", "file"],
)


@router.post(
    "/voices/clone",
    summary="Create a cloned voice from an audio sample",
    status_code=201,
    response_model=ClonedVoice,
    responses=error_responses(400, 413, 415, 502),
    openapi_extra=_CLONE_BODY,
)
async def create_clone(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    principal: Annotated[Principal, Depends(require(Scope.VOICES_WRITE, Service.CLONING))],
    _idempotent: IdempotencyKey,
) -> ClonedVoice:
    async with receive_upload(
        request, context.settings.max_upload_bytes, context.uploads_dir
    ) as upload:
        clone_request = validate_clone_fields(upload.fields)
        voice = await clone_voice(context, principal, ledger, clone_request, upload.path)
    return ClonedVoice(voice=shown(context.engines, voice))


@router.delete(
    VOICE_PATH,
    summary="Delete one of the organization's cloned voices",
    response_model=DeletedVoice,
    responses=error_responses(404),
)
async def delete_clone(
    id: Annotated[
        str,
        Path(
            description="A clone's id, as POST /voices/clone answers it.",
            openapi_examples={
                "clone": {"summary": "A clone's id", "value": "voice_3f9c2b7d1e0a4c5b6a7d8e9f"}
            },
        ),
    ],
    context: Context,
    principal: Annotated[Principal, Depends(require(Scope.VOICES_WRITE))],
) -> DeletedVoice:
    await delete_voice(context, principal, id)
    return DeletedVoice(deleted=True, id=id)
