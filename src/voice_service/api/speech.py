from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from voice_service.audio import output_formats
from voice_service.audio.encode import AudioFormat
from voice_service.audio.output_formats import parse_output_format
from voice_service.books.ledger import Ledger
from voice_service.speech.schemas import SpeechRequest
from voice_service.speech.service import (
    manner_of,
    stream_speech,
    stream_with_timestamps,
    synthesize_speech,
    synthesize_with_timestamps,
    timestamped_json,
)
from voice_service.tenancy.principal import Principal
from voice_service.web.context import AppContext
from voice_service.web.deps import Context, IdempotencyKey, RequestLedger, Speaker
from voice_service.web.schemas import error_responses, json_request_body, parse_json
from voice_service.web.streaming import MeteredStream

router = APIRouter(tags=["speech"])

NDJSON = "application/x-ndjson"

_AUDIO = {"audio/mpeg": {"schema": {"type": "string", "format": "binary"}}}

# ElevenLabs' names of the answer's format (a query parameter, as ElevenLabs takes it).
OutputFormatName = Annotated[
    str | None,
    Query(
        alias=output_formats.PARAMETER,
        description=output_formats.DESCRIPTION,
        openapi_examples={
            "mp3": {"summary": "MP3, 44.1 kHz, 128 kbit/s", "value": "mp3_44100_128"}
        },
    ),
]


@dataclass(frozen=True, slots=True)
class _SpeechCall:
    """What each of the four routes starts from: the caller, and its request read."""

    context: AppContext
    ledger: Ledger
    principal: Principal
    body: SpeechRequest
    fmt: AudioFormat


async def _speech_call(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    principal: Speaker,
    _idempotent: IdempotencyKey,
    output_format: OutputFormatName = None,
) -> _SpeechCall:
    fmt = parse_output_format(output_format)
    body = await parse_json(request, SpeechRequest)
    return _SpeechCall(context, ledger, principal, body, fmt)


SpeechCall = Annotated[_SpeechCall, Depends(_speech_call)]


@router.post(
    "/text-to-speech",
    summary="Generate speech from text (MP3 unless output_format names another format)",
    response_class=Response,
    responses={
        200: {"description": "The audio, in `output_format`.", "content": _AUDIO},
        **error_responses(400, 404, 502),
    },
    openapi_extra=json_request_body(SpeechRequest),
)
async def text_to_speech(call: SpeechCall) -> Response:
    audio = await synthesize_speech(call.context, call.principal, call.ledger, call.body, call.fmt)
    return Response(audio, media_type=call.fmt.media_type)


@router.post(
    "/text-to-speech/stream",
    summary="Generate speech from text, streamed as it is synthesized",
    description="The same request, errors, limits, formats and units as /text-to-speech. The audio "
    "arrives with chunked transfer, its first bytes as soon as the first sentence is "
    "spoken. Errors found before the first byte get their status; a failure after it "
    "cuts the stream off (the connection closes without the final chunk). Billed only "
    "when the whole stream was handed to the server; the request log records what a "
    "stream that ended early delivered.",
    response_class=Response,
    responses={
        200: {"description": "The audio, in `output_format`, streamed.", "content": _AUDIO},
        **error_responses(400, 404, 502),
    },
    openapi_extra=json_request_body(SpeechRequest),
)
async def text_to_speech_stream(call: SpeechCall) -> MeteredStream:
    speech = await stream_speech(
        call.context,
        call.principal,
        call.ledger,
        call.body.voice_id,
        call.body.text,
        call.fmt,
        manner=await manner_of(call.context, call.principal, call.body),
    )
    return MeteredStream(
        speech.chunks, media_type=call.fmt.media_type, ledger=call.ledger, charge=speech.charge
    )


_TIMED = {
    "application/json": {
        "schema": {
            "type": "object",
            "properties": {
                "audio_base64": {"type": "string"},
                "alignment": {
                    "type": "object",
                    "properties": {
                        "characters": {"type": "array", "items": {"type": "string"}},
                        "character_start_times_seconds": {
                            "type": "array",
                            "items": {"type": "number"},
                        },
                        "character_end_times_seconds": {
                            "type": "array",
                            "items": {"type": "number"},
                        },
                    },
                },
            },
        }
    }
}


@router.post(
    "/text-to-speech/with-timestamps",
    summary="Generate speech from text, with when each character is spoken",
    description="The same request, errors, formats and units as /text-to-speech. The audio "
    "comes base64-encoded in JSON beside ElevenLabs' `alignment`: every character of the "
    "text with its start and end in seconds, from the engine's own phoneme durations. "
    "A voice spoken by an ElevenLabs provider comes with the times ElevenLabs reports; one "
    "spoken by an OpenAI-compatible provider is refused (400): that API reports none.",
    response_class=Response,
    responses={
        200: {"description": "The audio and its alignment.", "content": _TIMED},
        **error_responses(400, 404, 502),
    },
    openapi_extra=json_request_body(SpeechRequest),
)
async def text_to_speech_with_timestamps(call: SpeechCall) -> Response:
    audio, alignment = await synthesize_with_timestamps(
        call.context, call.principal, call.ledger, call.body, call.fmt
    )
    return Response(timestamped_json(audio, alignment), media_type="application/json")


@router.post(
    "/text-to-speech/with-timestamps/stream",
    summary="Generate speech from text with timestamps, streamed as it is synthesized",
    description="As /text-to-speech/with-timestamps, streamed like /text-to-speech/stream: "
    "one JSON object per line, each with the audio made since the last and the characters "
    "spoken in it (times from the start of the whole audio).",
    response_class=Response,
    responses={
        200: {"description": "JSON lines.", "content": {NDJSON: {}}},
        **error_responses(400, 404, 502),
    },
    openapi_extra=json_request_body(SpeechRequest),
)
async def text_to_speech_with_timestamps_stream(call: SpeechCall) -> MeteredStream:
    speech = await stream_with_timestamps(
        call.context, call.principal, call.ledger, call.body, call.fmt
    )
    return MeteredStream(speech.chunks, media_type=NDJSON, ledger=call.ledger, charge=speech.charge)
