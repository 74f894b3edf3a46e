from __future__ import annotations

from fastapi import APIRouter, Response

from voice_service.deps import Authenticated, Context
from voice_service.schemas import error_responses
from voice_service.voices.repository import list_clones
from voice_service.voices.schemas import VoiceList

router = APIRouter(tags=["voices"])


@router.get(
    "/voices",
    summary="List the catalogue voices and the organization's cloned voices",
    response_model=VoiceList,
    responses=error_responses(),
)
async def list_voices(context: Context, principal: Authenticated) -> Response:
    async with context.sessions() as session:
        clones = await list_clones(session, principal.org_id)
    assert context.voice_listing is not None
    return Response(context.voice_listing.render(clones), media_type="application/json")
