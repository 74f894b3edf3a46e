"""Live transcription over a WebSocket: OpenAI's `GET /v1/realtime?intent=transcription`,
and the native `/api/v1/speech-to-text/realtime` speaking the same protocol.

The upgrade is a request like any other until it is accepted: the key is checked (401,
403, 429 answered before upgrading, in the shape of the path's API), the session counted
against the key's limit, and the request logged once, when the session ends, with status
101. Whatever ends the session (the client, idleness, its time limit, a monthly cap) bills
the seconds of audio received, rounded up, under `realtime`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from fractions import Fraction
from typing import Any

import numpy as np
from fastapi import APIRouter, WebSocket
from starlette.responses import Response
from starlette.websockets import WebSocketDisconnect, WebSocketState

from voice_service.admission import Job
from voice_service.audio.encode import FORMATS, OutputFormat, encode
from voice_service.context import AppContext
from voice_service.deps import authenticate_secret, check_scope
from voice_service.engines.protocols import EngineError, Pcm, SpeechToText, TranscribeOptions
from voice_service.errors import (
    ApiError,
    InvalidRequest,
    ProviderError,
    RateLimited,
    envelope_bytes,
)
from voice_service.ledger import Ledger, log_failure
from voice_service.providers.wire import AudioFile
from voice_service.realtime.audio_in import RATE, Floats
from voice_service.realtime.open_sessions import open_session
from voice_service.realtime.transcription import TranscriptionSession
from voice_service.transcription.service import known_languages, parse_language
from voice_service.usage.charge import Charge
from voice_service.vocabulary import Capability, Scope, Service, UsageEndpoint

logger = logging.getLogger(__name__)

# Seconds of audio a capped key's session holds ahead of what it has sent.
HOLD_AHEAD = 60

native_router = APIRouter()
openai_router = APIRouter(prefix="/v1")


@openai_router.websocket("/realtime")
async def openai_realtime(websocket: WebSocket) -> None:
    await serve(websocket, intent=websocket.query_params.get("intent"))


@native_router.websocket("/speech-to-text/realtime")
async def native_realtime(websocket: WebSocket) -> None:
    await serve(websocket, intent="transcription")


async def serve(websocket: WebSocket, intent: str | None) -> None:
    context: AppContext = websocket.app.state.context
    ledger = Ledger(context.books, "GET", websocket.url.path)
    ledger.attach(websocket.scope)
    try:
        if intent != "transcription":
            raise InvalidRequest(
                "Only transcription sessions are served: connect with intent=transcription.",
                param="intent",
            )
        principal = await authenticate_secret(websocket, context, _bearer(websocket))
        check_scope(principal, Scope.SPEECH_TO_TEXT, Service.SPEECH_TO_TEXT)
        _check_transcriber(context)
        limit = context.settings.max_realtime_sessions_per_key
        place = open_session(
            context.books.sessions, principal, ledger.request_id, limit, context.books.clock
        )
        async with place:
            await ledger.hold(1)  # a capped key with nothing left is refused here
            await websocket.accept(headers=[(b"x-request-id", ledger.request_id.encode())])
            ledger.stream_starting()
            await _run(websocket, context, ledger)
    except ApiError as error:
        if websocket.client_state is WebSocketState.CONNECTING:
            await _deny(websocket, ledger, error)
        else:
            raise
    except Exception as exc:
        log_failure(ledger.request_id, exc)
        if websocket.client_state is WebSocketState.CONNECTING:
            await _deny(websocket, ledger, ProviderError("The session could not be opened."))
        elif not ledger.settled:
            await ledger.stream_ended(Charge(UsageEndpoint.REALTIME, 0), ProviderError(), 0)


async def _run(websocket: WebSocket, context: AppContext, ledger: Ledger) -> None:
    """The open session, until it ends; then its one log row and its bill."""
    sent = 0
    lock = asyncio.Lock()

    async def send(event: dict[str, Any]) -> None:
        nonlocal sent
        text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        async with lock:
            if websocket.application_state is not WebSocketState.CONNECTED:
                return
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await websocket.send_text(text)
                sent += len(text)

    known = known_languages(context)
    session = TranscriptionSession(
        send,
        lambda audio, options: _transcribe(context, ledger, audio, options),
        lambda value: parse_language(value, known),
        _CapGate(ledger),
    )
    ending: tuple[str, str] | None = None
    idle = context.settings.realtime_idle_seconds
    try:
        await session.created()
        ends_at = time.monotonic() + context.settings.max_realtime_seconds
        while True:
            left = ends_at - time.monotonic()
            try:
                async with asyncio.timeout(min(idle, max(0.0, left))):
                    message = await websocket.receive()
            except TimeoutError:
                if session.busy and time.monotonic() < ends_at:
                    continue  # waiting on the node is not idleness
                if time.monotonic() >= ends_at:
                    ending = (
                        "session_expired",
                        (
                            "The session reached its limit of "
                            f"{context.settings.max_realtime_seconds:g} s."
                        ),
                    )
                else:
                    ending = "session_idle", f"No event for {idle:g} s: the session ends."
                break
            if message["type"] == "websocket.disconnect":
                break
            try:
                await session.handle(message.get("text") or message.get("bytes") or b"")
            except RateLimited as error:  # a monthly cap: the audio past it was not taken
                ending = "rate_limited", error.message
                break
    finally:
        await session.close()
        if ending is not None:
            code, text = ending
            await send(
                {
                    "type": "error",
                    "event_id": f"event_{ledger.request_id}",
                    "error": {"type": "invalid_request_error", "code": code, "message": text},
                }
            )
            with contextlib.suppress(RuntimeError, OSError):
                await websocket.close(1000, code)
        units = math.ceil(session.seconds_received)
        await ledger.session_ended(Charge(UsageEndpoint.REALTIME, units), sent)


class _CapGate:
    """Under a monthly cap, the units of the session's audio are held before it is taken,
    a minute ahead (or what is left of the cap); `RateLimited` once none is left."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._open = not ledger.capped

    async def __call__(self, seconds: Fraction) -> None:
        needed = math.ceil(seconds)
        if self._open or needed <= self._ledger.units_held:
            return
        try:
            await self._ledger.hold(needed + HOLD_AHEAD)
        except RateLimited:
            await self._ledger.hold(needed)
        self._open = self._ledger.units_held == 0  # the cap was lifted meanwhile


async def _transcribe(
    context: AppContext, ledger: Ledger, audio: Floats, options: TranscribeOptions
) -> str:
    """A turn's text: from the provider the providers file routes its language to, else
    from this node's engine, through the same admission as every transcription."""
    assert context.engines is not None
    transcriber = context.engines.transcriber
    provider = context.providers.transcriber(options.language, local=transcriber is not None)
    if provider is not None:
        wav = encode([_pcm16(audio)], FORMATS[OutputFormat.WAV])
        upload = AudioFile("turn.wav", wav, "audio/wav")
        transcript = await provider.transcribe(upload, options, audio.size / RATE)
        return transcript.text
    if transcriber is None:
        raise ProviderError("This node has no transcription engine.")
    job = Job(Capability.SPEECH_TO_TEXT, context.engines.transcriber_name, abandoned=None)
    try:
        return await context.pool.run(job, _text, transcriber, audio, options)
    except EngineError as exc:
        logger.error("a realtime turn of %s failed: %r", ledger.request_id, exc)
        raise ProviderError() from exc


def _text(transcriber: SpeechToText, audio: Floats, options: TranscribeOptions) -> str:
    stream = transcriber.stream(audio, options)
    return " ".join(segment.text.strip() for segment in stream.segments).strip()


def _pcm16(audio: Floats) -> Pcm:
    return Pcm(np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16), RATE)


def _check_transcriber(context: AppContext) -> None:
    assert context.engines is not None
    if context.engines.transcriber is None and not context.providers.languages():
        raise ProviderError(
            "This node has no transcription engine: VOICE_SERVICE_STT_ENGINES is empty and "
            "no provider transcribes."
        )


def _bearer(websocket: WebSocket) -> str | None:
    scheme, _, secret = websocket.headers.get("authorization", "").partition(" ")
    return secret.strip() if scheme.lower() == "bearer" else None


async def _deny(websocket: WebSocket, ledger: Ledger, error: ApiError) -> None:
    """Refuse the upgrade with an HTTP answer, as any other request's error."""
    await ledger.refused(error)
    body = envelope_bytes(error, ledger.request_id, websocket.url.path)
    headers = {**error.headers, "X-Request-ID": ledger.request_id}
    response = Response(body, error.status, headers, media_type="application/json")
    await websocket.send_denial_response(response)
