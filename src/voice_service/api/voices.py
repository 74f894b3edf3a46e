from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from voice_service.api.voice_paths import VOICE_PATH
from voice_service.voices.listing import clones_of, shown
from voice_service.voices.schemas import EXAMPLE_VOICE_ID, OneVoice, VoiceList
from voice_service.voices.service import find_voice
from voice_service.web.deps import Context, VoicesReader
from voice_service.web.schemas import error_responses

router = APIRouter(tags=["voices"])


@router.get(
    "/voices",
    summary="List the catalogue voices and the organization's cloned voices",
    response_model=VoiceList,
    responses=error_responses(),
)
async def list_voices(context: Context, principal: VoicesReader) -> Response:
    listing = context.voice_listing
    assert listing is not None

    async def load() -> bytes:
        return listing.render(await clones_of(context, principal.org_id))

    body = await context.clone_listings.get(principal.org_id, load)
    return Response(body, media_type="application/json")


@router.get(
    VOICE_PATH,
    summary="One catalogue voice or one of the organization's cloned voices",
    response_model=OneVoice,
    responses=error_responses(404),
)
async def get_voice(
    id: Annotated[
        str, Path(openapi_examples={"joe": {"summary": "Piper Joe", "value": EXAMPLE_VOICE_ID}})
    ],
    context: Context,
    principal: VoicesReader,
) -> OneVoice:
    return OneVoice(voice=shown(context.engines, await find_voice(context, principal, id)))
