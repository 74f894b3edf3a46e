"""Live transcription sessions: the WebSocket's events into `TranscriptionSession`, its
turns to this node's Whisper (through the inference pool's admission) or to the provider
the providers file routes the session's language to; seconds of audio billed at the end."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from fractions import Fraction

from voice_service.audio.vad import Floats
from voice_service.books.ledger import Ledger
from voice_service.books.unit_gate import UnitGate
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import RateLimited
from voice_service.core.vocabulary import UsageEndpoint
from voice_service.engines.protocols import TranscribeOptions
from voice_service.realtime.transcription import TranscriptionSession
from voice_service.realtime.upgrade import (
    FINISH_SHARE,
    Ending,
    Session,
    next_message,
)
from voice_service.tenancy.principal import Principal
from voice_service.transcription.service import (
    OPENAI_TRANSCRIPTION_MODELS,
    known_languages,
    offered_models,
    parse_language,
    parse_model,
    require_transcriber,
    transcribe_samples,
)
from voice_service.web.context import AppContext

# Seconds of audio a capped key's session holds ahead of what it has sent.
HOLD_AHEAD = 60


async def check_transcriber(context: AppContext, _principal: Principal) -> None:
    require_transcriber(context)


async def run_transcription(session: Session, _prepared: None) -> None:
    """The open session, until it ends (when the node stops, after its turns are
    transcribed); then its one log row and its bill."""
    context, ledger, channel = session.context, session.ledger, session.channel
    known = known_languages(context)
    offered = offered_models(context)
    gate = UnitGate(ledger, HOLD_AHEAD)

    async def take(seconds: Fraction) -> None:
        await gate(math.ceil(seconds))
        session.activity.touch()  # audio, taken: the session is not idle

    transcription = TranscriptionSession(
        channel.send,
        lambda audio, options: _text(context, ledger, audio, options),
        lambda value: parse_language(value, known),
        take,
        lambda: _spare_capacity(context),
        parse_model=lambda value: parse_model(value, offered, "model", OPENAI_TRANSCRIPTION_MODELS),
    )
    ending: Ending | None = None
    idle = context.settings.realtime_idle_seconds
    try:
        await transcription.created()
        ends_at = time.monotonic() + context.settings.max_realtime_seconds
        while True:
            message = await next_message(session, ends_at, idle, lambda: transcription.busy)
            if message == "stopping":
                await _finish(session, transcription)
                if session.cut_off.event.is_set():
                    ending = Ending.cut_off(session)
                else:
                    await channel.close(1012, "service restart")  # the client reconnects
                break
            if message == "cut_off":
                ending = Ending.cut_off(session)
                break
            if message == "expired":
                limit = context.settings.max_realtime_seconds
                ending = Ending("session_expired", f"The session reached its limit of {limit:g} s.")
                break
            if message == "idle":
                ending = Ending("session_idle", f"No audio for {idle:g} s: the session ends.")
                break
            if message["type"] == "websocket.disconnect":
                break
            try:
                await transcription.handle(message.get("text") or message.get("bytes") or b"")
            except RateLimited as error:  # a monthly cap: the audio past it was not taken
                ending = Ending("rate_limited", error.message)
                break
    finally:
        await transcription.close()
        if ending is not None:
            await channel.send(
                {
                    "type": "error",
                    "event_id": f"event_{ledger.request_id}",
                    "error": {
                        "type": "invalid_request_error",
                        "code": ending.code,
                        "message": ending.message,
                    },
                }
            )
            await channel.close(ending.close_code, ending.code)
        units = math.ceil(transcription.seconds_billed)
        charge = Charge(UsageEndpoint.REALTIME, units)
        await ledger.session_ended(charge, channel.bytes_sent, session.cut_off.code)


async def _finish(session: Session, transcription: TranscriptionSession) -> None:
    """The node is stopping: the turns the session took are transcribed, within part of
    the node's drain timeout (the rest is for closing and billing), unless its key is cut
    off meanwhile."""
    seconds = session.context.settings.drain_timeout_seconds * FINISH_SHARE
    finishing = asyncio.ensure_future(transcription.finish())
    cut_off = asyncio.ensure_future(session.cut_off.event.wait())
    try:
        await asyncio.wait(
            {finishing, cut_off}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for waiting in (finishing, cut_off):
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting


def _spare_capacity(context: AppContext) -> bool:
    """A partial transcript may run now: a provider transcribes (its own limits apply), or
    one of this node's workers is free."""
    assert context.engines is not None
    local = context.engines.transcribers is not None
    return context.pool.has_free_slot if local else True


async def _text(
    context: AppContext, ledger: Ledger, audio: Floats, options: TranscribeOptions
) -> str:
    heard = await transcribe_samples(context, audio, options, ledger, live=True)
    return heard.text
