"""The WebSocket endpoints: live transcription (OpenAI's Realtime protocol, on both APIs)
and text streamed in (ElevenLabs' input-streaming protocol)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, WebSocket

from voice_service.core.errors import InvalidRequest
from voice_service.core.vocabulary import Scope, Service, UsageEndpoint
from voice_service.realtime.input_streaming import preparer, run_input_stream
from voice_service.realtime.live_transcription import check_transcriber, run_transcription
from voice_service.realtime.upgrade import serve_session
from voice_service.tenancy.principal import Principal
from voice_service.web.context import AppContext

# An endpoint's own checks of an upgrade, after the key's (see `serve_session`).
Prepare = Callable[[AppContext, Principal], Awaitable[None]]

native_router = APIRouter()
openai_router = APIRouter(prefix="/v1")


@openai_router.websocket("/realtime")
async def openai_realtime(websocket: WebSocket) -> None:
    intent = websocket.query_params.get("intent")

    async def prepare(context: AppContext, principal: Principal) -> None:
        if intent != "transcription":
            raise InvalidRequest(
                "Only transcription sessions are served: connect with intent=transcription.",
                param="intent",
            )
        await check_transcriber(context, principal)

    await _transcription(websocket, prepare)


@native_router.websocket("/speech-to-text/realtime")
async def native_realtime(websocket: WebSocket) -> None:
    await _transcription(websocket, check_transcriber)


async def _transcription(websocket: WebSocket, prepare: Prepare) -> None:
    await serve_session(
        websocket,
        Scope.SPEECH_TO_TEXT,
        Service.SPEECH_TO_TEXT,
        UsageEndpoint.REALTIME,
        prepare,
        run_transcription,
    )


@native_router.websocket("/text-to-speech/{voice_id}/stream-input")
async def stream_input(websocket: WebSocket, voice_id: str) -> None:
    await serve_session(
        websocket,
        Scope.TEXT_TO_SPEECH,
        Service.TEXT_TO_SPEECH,
        UsageEndpoint.TEXT_TO_SPEECH,
        preparer(
            voice_id,
            websocket.query_params.get("output_format"),
            websocket.query_params.get("language_code"),
        ),
        run_input_stream,
    )
