"""GET /models: the transcription models a request may name."""

from __future__ import annotations

from fastapi import APIRouter

from voice_service.transcription.schemas import TranscriptionModel, TranscriptionModelList
from voice_service.transcription.service import offered_model_list
from voice_service.web.deps import Authenticated, Context
from voice_service.web.schemas import error_responses

router = APIRouter(tags=["transcription"])


@router.get(
    "/models",
    summary="List the transcription models this node offers",
    responses=error_responses(),
)
async def list_models(context: Context, _principal: Authenticated) -> TranscriptionModelList:
    return TranscriptionModelList(
        models=[
            TranscriptionModel(
                model_id=model.name,
                engine=model.engine,
                languages=sorted(model.languages),
                default=model.default,
                loaded=model.loaded,
            )
            for model in offered_model_list(context)
        ]
    )
