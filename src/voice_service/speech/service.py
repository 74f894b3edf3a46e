"""Text to speech: find the caller's voice, synthesize chunk by chunk in the pool, bill.

Every endpoint that speaks goes through `speech_chunks`: the engines yield PCM per chunk of
text, the encoder turns each into bytes, and the caller either sends them as they come
(streams) or joins them into one file (the native /text-to-speech, with exact headers).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from voice_service.admission import Job
from voice_service.audio.encode import AudioEncoder, OutputFormat
from voice_service.auth.principal import Principal
from voice_service.context import AppContext
from voice_service.engines.deadline import InferenceBudget
from voice_service.engines.protocols import EngineError, UnknownVoice
from voice_service.engines.registry import Engines
from voice_service.errors import NotFound, ProviderError
from voice_service.ledger import Ledger
from voice_service.models import Voice
from voice_service.speech.schemas import SpeechRequest
from voice_service.streaming import started
from voice_service.usage.charge import Charge
from voice_service.vocabulary import Capability, UsageEndpoint
from voice_service.voices.service import find_voice

logger = logging.getLogger(__name__)

# Characters per second of the slowest speech a provider makes (people say about 15).
SLOWEST_SPEECH = 5.0


def speech_charge(voice: Voice, text: str) -> Charge:
    """What speaking `text` costs, however it is delivered: one unit per character."""
    return Charge(UsageEndpoint.TEXT_TO_SPEECH, len(text), voice.id)


async def synthesize_speech(
    context: AppContext, principal: Principal, ledger: Ledger, body: SpeechRequest
) -> bytes:
    """The native /text-to-speech: one MP3 file, billed once it is made."""
    voice = await find_voice(context, principal, body.voice_id)
    charge = speech_charge(voice, body.text)
    await ledger.hold(charge.units)
    audio = await speak(context, voice, body.text, ledger)
    await ledger.bill(charge)
    return audio


@dataclass(frozen=True, slots=True)
class SpeechStream:
    chunks: AsyncGenerator[bytes, None]  # its first chunk made: errors before it are raised
    charge: Charge  # billed once every chunk went out


async def stream_speech(
    context: AppContext,
    principal: Principal,
    ledger: Ledger,
    voice_id: str,
    text: str,
    fmt: OutputFormat,
    *,
    speed: float = 1.0,
) -> SpeechStream:
    """A streamed answer of `voice_id` saying `text`, its units held first."""
    voice = await find_voice(context, principal, voice_id)
    charge = speech_charge(voice, text)
    await ledger.hold(charge.units)
    chunks = speech_chunks(context, voice, text, ledger, fmt, streaming=True, speed=speed)
    return SpeechStream(await started(chunks), charge)


async def speak(context: AppContext, voice: Voice, text: str, ledger: Ledger) -> bytes:
    """One MP3 file of `voice` saying `text`; not billed (the caller bills)."""
    chunks = speech_chunks(context, voice, text, ledger, OutputFormat.MP3, streaming=False)
    return b"".join([chunk async for chunk in chunks])


async def speech_chunks(
    context: AppContext,
    voice: Voice,
    text: str,
    ledger: Ledger,
    fmt: OutputFormat,
    *,
    streaming: bool,
    speed: float = 1.0,
) -> AsyncGenerator[bytes, None]:
    """`voice` saying `text` in `fmt`, encoded bytes as each chunk of text is spoken (or the
    whole file at the end when not `streaming`). Engine failures are API errors here; a
    client that leaves stops the speech at the next chunk (`ClientClosedRequest`). A
    provider's voice (a clone made there too) is spoken by the provider, its bytes passed
    on as they arrive."""
    assert context.engines is not None
    remote = context.providers.speaker(voice.engine_voice) if voice.profile is None else None
    if remote is not None:
        # The provider's own timeout, plus the inference budget's share for the longest
        # the text could take to say.
        seconds = remote.provider.config.timeout_seconds
        seconds += context.inference_budget.per_audio_second * len(text) / SLOWEST_SPEECH
        made_there = remote.provider.speak(
            remote.voice,
            text,
            fmt,
            speed=speed,
            bitrate=context.settings.mp3_bitrate,
            streaming=streaming,
            deadline=time.monotonic() + seconds,
        )
        async with aclosing(made_there) as chunks:
            async for chunk in chunks:
                if chunk:
                    yield chunk
        return
    request_id = ledger.request_id
    engine = Engines.speaker_name(voice.engine_voice, voice.profile)
    made = context.pool.stream(
        Job(Capability.TEXT_TO_SPEECH, engine, abandoned=ledger.client_gone),
        _encoded_chunks,
        context.engines,
        voice.engine_voice,
        voice.profile,
        text,
        AudioEncoder(fmt, streaming=streaming, bitrate=context.settings.mp3_bitrate, speed=speed),
        context.inference_budget,
        request_id,
        functools.partial(context.metrics.count_audio, Capability.TEXT_TO_SPEECH),
    )
    try:
        async with aclosing(made) as chunks:
            async for chunk in chunks:
                if chunk:
                    yield chunk
    except UnknownVoice as exc:
        logger.error("voice %s of %s: %s", voice.id, request_id, exc)
        raise NotFound(f"Voice {voice.id!r} is not served by this node.") from None
    except EngineError as exc:
        logger.error("synthesis failed for %s with voice %s: %r", request_id, voice.id, exc)
        raise ProviderError() from exc


def _encoded_chunks(
    engines: Engines,
    voice_key: str,
    profile: Mapping[str, Any] | None,
    text: str,
    encoder: AudioEncoder,
    budget: InferenceBudget,
    request_id: str,
    count_audio: Callable[[float], None],
) -> Iterator[bytes]:
    deadline = budget.start()
    spoken = 0.0
    # A stream starts with a short chunk, so its first audio comes at once; a whole file
    # keeps every sentence in one piece (the best prosody).
    pieces = engines.speak(voice_key, profile, text, quick_start=encoder.streaming)
    for index, pcm in enumerate(pieces, start=1):
        logger.debug("%s spoke chunk %d", request_id, index)
        spoken += pcm.duration_seconds
        count_audio(pcm.duration_seconds)
        # Checked after each chunk, so a stream whose client reads too slowly stops too.
        deadline.check(spoken)
        # Every chunk is a step of its own, bytes or not (a whole file's encoder keeps
        # them to the end): between steps the pool gives the worker to others and stops
        # the speech of a client that left.
        yield encoder.add(pcm)
    yield encoder.finish()
