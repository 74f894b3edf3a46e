from __future__ import annotations

from fastapi import APIRouter

from voice_service.deps import Authenticated, Context
from voice_service.schemas import error_responses
from voice_service.voices.repository import list_visible
from voice_service.voices.schemas import Voice, VoiceList

router = APIRouter(tags=["voices"])


@router.get(
    "/voices",
    summary="List the catalogue voices and the organization's cloned voices",
    response_model=VoiceList,
    responses=error_responses(),
)
async def list_voices(context: Context, principal: Authenticated) -> VoiceList:
    async with context.sessions() as session:
        voices = await list_visible(session, principal.org_id)
    return VoiceList(voices=[Voice.of(v) for v in voices])
