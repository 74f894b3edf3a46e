"""Text to speech: find the caller's voice, synthesize in the pool, bill on success."""

from __future__ import annotations

import logging
from typing import Any

from voice_service.audio.mp3 import Mp3Encoder
from voice_service.auth.principal import Principal
from voice_service.context import AppContext
from voice_service.engines.deadline import InferenceBudget
from voice_service.engines.protocols import EngineError
from voice_service.engines.registry import Engines
from voice_service.engines.world import VoiceProfile
from voice_service.errors import ProviderError, VoiceNotFound
from voice_service.models import Voice
from voice_service.requestlog.record import RequestRecord
from voice_service.speech.schemas import SpeechRequest
from voice_service.usage.billing import bill_success
from voice_service.voices.repository import get_visible

logger = logging.getLogger(__name__)

ENDPOINT = "text-to-speech"


async def synthesize_speech(
    context: AppContext, principal: Principal, record: RequestRecord, body: SpeechRequest
) -> bytes:
    async with context.sessions() as session:
        voice = await get_visible(session, principal.org_id, body.voice_id)
    if voice is None:
        raise VoiceNotFound(body.voice_id)
    audio = await speak(context, voice, body.text, record.request_id)
    await bill_success(context, record, principal, ENDPOINT, len(body.text))
    return audio


async def speak(context: AppContext, voice: Voice, text: str, request_id: str) -> bytes:
    """MP3 of `voice` saying `text`, made in the pool; not billed (the caller bills)."""
    assert context.engines is not None
    try:
        return await context.pool.run(
            _speak,
            context.engines,
            voice.engine_voice,
            voice.profile,
            text,
            context.settings.mp3_bitrate,
            context.inference_budget,
        )
    except (EngineError, KeyError) as exc:
        logger.error("synthesis failed for %s with voice %s: %r", request_id, voice.id, exc)
        raise ProviderError() from exc


def _speak(
    engines: Engines,
    voice_key: str,
    profile: dict[str, Any] | None,
    text: str,
    bitrate: int,
    budget: InferenceBudget,
) -> bytes:
    deadline = budget.start()
    encoder = Mp3Encoder(bitrate)
    spoken = 0.0
    clone = VoiceProfile.from_dict(profile) if profile is not None else None
    for pcm in engines.speak(voice_key, clone, text):
        encoder.add(pcm)
        spoken += pcm.duration_seconds
        deadline.check(spoken)
    return encoder.finish()
