"""Transcription: validate the upload by content, decode bounded, transcribe, bill seconds."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from voice_service.audio.decode import decode_audio
from voice_service.audio.formats import identify_audio
from voice_service.auth.principal import Principal
from voice_service.context import AppContext
from voice_service.engines.deadline import InferenceBudget
from voice_service.engines.protocols import EngineError, SpeechToText, Transcription
from voice_service.errors import InvalidRequest, ProviderError
from voice_service.requestlog.record import RequestRecord
from voice_service.uploads import audio_errors_as_api_errors
from voice_service.usage.billing import bill_success

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TranscribedAudio:
    transcription: Transcription
    duration_seconds: Fraction  # exact, as decode_audio counts it


def parse_language(value: str | None, known: frozenset[str]) -> str | None:
    """None (detect) for an omitted or empty hint; else a code the model knows."""
    if value is None or not value.strip():
        return None
    code = value.strip().lower()
    if code not in known:
        raise InvalidRequest(
            f"language: {value!r} is not an ISO 639-1 code the model knows "
            "(two letters, e.g. en, de, es); omit it to detect the language."
        )
    return code


async def transcribe_upload(
    context: AppContext,
    principal: Principal,
    record: RequestRecord,
    endpoint: str,
    path: Path,
    language: str | None,
) -> Transcription:
    assert context.engines is not None
    transcriber = context.engines.transcriber
    code = parse_language(language, transcriber.languages())
    try:
        with audio_errors_as_api_errors("audio"):
            result = await context.pool.run(
                _transcribe_file,
                transcriber,
                path,
                code,
                context.settings.max_audio_seconds,
                context.inference_budget,
            )
    except EngineError as exc:
        logger.error("transcription failed for %s: %r", record.request_id, exc)
        raise ProviderError() from exc
    await bill_success(context, record, principal, endpoint, billed_seconds(result))
    return result.transcription


def billed_seconds(result: TranscribedAudio) -> int:
    # One unit per started second, rounded up in exact arithmetic (a float sum once billed
    # 5.000 s as 6); audio of unknown (zero) length still costs one.
    return max(1, math.ceil(result.duration_seconds))


def _transcribe_file(
    transcriber: SpeechToText,
    path: Path,
    language: str | None,
    max_seconds: float,
    budget: InferenceBudget,
) -> TranscribedAudio:
    deadline = budget.start()
    fmt = identify_audio(path)
    audio = decode_audio(path, max_seconds=max_seconds, fmt=fmt)
    stream = transcriber.stream(audio.samples, language)
    texts = []
    for text in stream.segments:
        deadline.check(float(audio.duration_seconds))
        texts.append(text)
    transcription = Transcription(text=" ".join(texts), language=stream.language)
    return TranscribedAudio(transcription, audio.duration_seconds)
