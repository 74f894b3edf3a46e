"""POST /v1/audio/speech, /v1/audio/transcriptions, /v1/audio/translations; GET /v1/models."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Request, Response

from voice_service.audio.encode import FORMATS
from voice_service.audio.formats import OPENAI_AUDIO
from voice_service.audio.policy import AudioPolicy
from voice_service.books.ledger import Ledger
from voice_service.core.errors import ApiError, InvalidRequest, NotFound
from voice_service.core.vocabulary import Scope, Service, UsageEndpoint
from voice_service.engines.diarization import SpeakerHints
from voice_service.engines.manner import Manner
from voice_service.engines.protocols import TranscribeOptions
from voice_service.openai_api import transcripts
from voice_service.openai_api.schemas import (
    TTS_MODELS,
    Model,
    ModelList,
    SpeechBody,
    TranscriptFormat,
)
from voice_service.openai_api.voices import voice_id_for
from voice_service.pronunciation.schemas import locators_of
from voice_service.pronunciation.service import with_dictionaries
from voice_service.speech.service import stream_speech
from voice_service.tenancy.principal import Principal
from voice_service.transcription.known_speakers import (
    KNOWN_SPEAKER_FORM_FIELDS,
    named_people,
)
from voice_service.transcription.service import (
    OPENAI_TRANSCRIPTION_MODELS,
    AudioInfo,
    TimedTranscript,
    TranscriptPart,
    known_languages,
    offered_models,
    parse_language,
    parse_model,
    transcribe_upload,
    transcript_parts,
    transcription_charge,
)
from voice_service.web.deps import (
    Authenticated,
    Context,
    IdempotencyKey,
    RequestLedger,
    Speaker,
    require,
)
from voice_service.web.schemas import (
    json_request_body,
    multipart_request_body,
    openai_error_responses,
    parse_json,
)
from voice_service.web.streaming import MeteredStream
from voice_service.web.uploads import NAMED_PEOPLE_FIELDS, Upload, receive_upload

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])
SSE = "text/event-stream"
Task = Literal["transcribe", "translate"]

_BINARY = {"schema": {"type": "string", "format": "binary"}}
_SPEECH = {
    200: {
        "description": "The audio in `response_format`, streamed as it is spoken; with "
        "`stream_format` sse, `speech.audio.delta` events and then `speech.audio.done`.",
        "content": {
            **{fmt.media_type: _BINARY for fmt in FORMATS.values()},
            SSE: {"schema": {"type": "string"}},
        },
    },
    **openai_error_responses(400, 404, 502),
}


def _transcription_body(task: Task) -> dict[str, Any]:
    # Translations have no word timestamps.
    timestamps = ["segment"] if task == "translate" else ["word", "segment"]
    properties: dict[str, dict[str, Any]] = {
        "file": {
            "type": "string",
            "format": "binary",
            "description": f"Audio: {OPENAI_AUDIO.text}; checked by content.",
        },
        "model": {
            "type": "string",
            "description": f"{', '.join(OPENAI_TRANSCRIPTION_MODELS)} (the node's default "
            "model), or one of the node's models that GET /v1/models lists; another is a 400.",
            "examples": ["whisper-1"],
        },
        "language": {
            "type": "string",
            "description": "ISO 639-1 code of the speech; omit it to detect the language.",
            "examples": ["en"],
        },
        "prompt": {"type": "string", "description": "Text that the speech continues."},
        "response_format": {
            "type": "string",
            "enum": [fmt.value for fmt in TranscriptFormat],
            "default": TranscriptFormat.JSON.value,
        },
        "temperature": {"type": "number", "minimum": 0, "maximum": 1, "default": 0},
        "timestamp_granularities[]": {
            "type": "array",
            "items": {"type": "string", "enum": timestamps},
            "description": "With verbose_json: which timestamps it gives.",
        },
        "stream": {
            "type": "boolean",
            "default": False,
            "description": "json or text only: `transcript.text.delta` events, then "
            "`transcript.text.done`.",
        },
    }
    if task == "transcribe":
        properties |= {f"{name}[]": field for name, field in KNOWN_SPEAKER_FORM_FIELDS.items()}
    return multipart_request_body(properties, required=["file"])


_TRANSCRIPT = {
    200: {
        "description": "The transcript in `response_format` (json, verbose_json, text, srt, "
        "vtt, or diarized_json: segments with their speaker, A, B, …), or its events "
        "(`stream`).",
        "content": {
            "application/json": {
                "schema": {"type": "object", "properties": {"text": {"type": "string"}}}
            },
            **{
                media_type: {"schema": {"type": "string"}}
                for media_type in ("text/plain", "application/x-subrip", "text/vtt", SSE)
            },
        },
    },
    **openai_error_responses(400, 502),
}


def _invalid_file_format(reason: str) -> ApiError:
    # OpenAI's answer to a file it does not take: 400 with this message, which its SDKs
    # raise as BadRequestError. The reason after it is ours.
    names = ", ".join(repr(name) for name in OPENAI_AUDIO.names)
    return InvalidRequest(
        f"Invalid file format. Supported formats: [{names}]; this file: {reason}.", param="file"
    )


# OpenAI's formats, checked by content like the native API's (see OPENAI_AUDIO).
OPENAI_POLICY = AudioPolicy(OPENAI_AUDIO, _invalid_file_format)


@router.post(
    "/audio/speech",
    summary="Generate speech from text (OpenAI's audio.speech)",
    response_class=Response,
    responses=_SPEECH,
    openapi_extra=json_request_body(SpeechBody),
)
async def speech(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    principal: Speaker,
    _idempotent: IdempotencyKey,
) -> MeteredStream:
    body = await parse_json(request, SpeechBody)
    assert context.voice_listing is not None
    voice_id = voice_id_for(body.voice_name, context.voice_listing.catalogue)
    fmt = FORMATS[body.response_format]
    locators = locators_of(body.pronunciation_dictionary_locators)
    said = Manner(body.speed, language=body.language_code)
    manner = await with_dictionaries(context, principal.org_id, locators, said)
    speech = await stream_speech(
        context, principal, ledger, voice_id, body.input, fmt, manner=manner
    )
    charge = speech.charge
    if body.stream_format == "sse":
        events = _speech_events(speech.chunks, charge.units)
        return MeteredStream(events, media_type=SSE, ledger=ledger, charge=charge)
    return MeteredStream(speech.chunks, media_type=fmt.media_type, ledger=ledger, charge=charge)


async def _speech_events(
    chunks: AsyncGenerator[bytes, None], units: int
) -> AsyncGenerator[bytes, None]:
    async with aclosing(chunks):
        async for chunk in chunks:
            audio = base64.b64encode(chunk).decode()
            yield _event({"type": "speech.audio.delta", "audio": audio})
    usage = {"input_tokens": units, "output_tokens": 0, "total_tokens": units}
    yield _event({"type": "speech.audio.done", "usage": usage})


# Both of Whisper's tasks need the key's speech-to-text scope and service.
Transcriber = Annotated[Principal, Depends(require(Scope.SPEECH_TO_TEXT, Service.SPEECH_TO_TEXT))]


@router.post(
    "/audio/transcriptions",
    summary="Transcribe an audio file (OpenAI's audio.transcriptions)",
    response_class=Response,
    responses=_TRANSCRIPT,
    openapi_extra=_transcription_body("transcribe"),
)
async def transcriptions(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    _: Transcriber,
    _idempotent: IdempotencyKey,
) -> Response:
    return await _transcribe(request, context, ledger, "transcribe", UsageEndpoint.SPEECH_TO_TEXT)


@router.post(
    "/audio/translations",
    summary="Translate speech into English text (OpenAI's audio.translations)",
    response_class=Response,
    responses=_TRANSCRIPT,
    openapi_extra=_transcription_body("translate"),
)
async def translations(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    _: Transcriber,
    _idempotent: IdempotencyKey,
) -> Response:
    return await _transcribe(request, context, ledger, "translate", UsageEndpoint.TRANSLATION)


async def _transcribe(
    request: Request, context: Context, ledger: Ledger, task: Task, endpoint: str
) -> Response:
    async with receive_upload(
        request, context.settings.max_upload_bytes, context.uploads_dir, NAMED_PEOPLE_FIELDS
    ) as upload:
        form = _TranscriptionForm.parse(
            upload, task, known_languages(context), offered_models(context)
        )
        diarized = form.format is TranscriptFormat.DIARIZED_JSON
        assert ledger.principal is not None
        known = await named_people(
            context,
            ledger.principal.org_id,
            upload.values,
            diarized=diarized,
            needs="response_format=diarized_json",
        )
        if form.stream:
            # The first part comes once the file is decoded (into memory, bounded by
            # MAX_AUDIO_SECONDS), so the upload can go when this block ends; a file that
            # does not decode is answered with its own status here.
            parts = transcript_parts(context, ledger, upload.path, form.options, OPENAI_POLICY)
            info = await anext(parts)
            assert isinstance(info, AudioInfo)
            return MeteredStream(
                _transcript_events(parts, info),
                media_type=SSE,
                ledger=ledger,
                charge=transcription_charge(endpoint, info),
            )
        transcript = await transcribe_upload(
            context,
            ledger,
            endpoint,
            upload.path,
            form.options,
            OPENAI_POLICY,
            speakers=SpeakerHints() if diarized else None,
            known=known,
        )
    body, media_type = transcripts.render(
        transcript,
        form.format,
        task,
        words="word" in form.granularities,
        segments="segment" in form.granularities or not form.granularities,
        temperature=form.options.temperature,
    )
    return Response(body, media_type=media_type)


async def _transcript_events(
    parts: AsyncGenerator[TranscriptPart, None], info: AudioInfo
) -> AsyncGenerator[bytes, None]:
    transcript = TimedTranscript(info)
    async with aclosing(parts):
        async for part in parts:
            assert not isinstance(part, AudioInfo)
            transcript.segments.append(part)
            delta = part.text if len(transcript.segments) == 1 else " " + part.text
            yield _event({"type": "transcript.text.delta", "delta": delta})
    done = {
        "type": "transcript.text.done",
        "text": transcript.text,
        "usage": transcripts.usage(transcript),
    }
    yield _event(done)


def _event(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


@dataclass(frozen=True, slots=True)
class _TranscriptionForm:
    """OpenAI's multipart fields, checked."""

    options: TranscribeOptions
    format: TranscriptFormat
    granularities: set[str]
    stream: bool

    @classmethod
    def parse(
        cls, upload: Upload, task: Task, languages: frozenset[str], models: Sequence[str]
    ) -> _TranscriptionForm:
        fields = upload.fields
        fmt = _choice(fields.get("response_format") or "json", TranscriptFormat, "response_format")
        granularities = set(
            upload.values("timestamp_granularities[]") + upload.values("timestamp_granularities")
        )
        if not granularities <= {"word", "segment"}:
            raise InvalidRequest(
                "timestamp_granularities[]: each must be word or segment.",
                param="timestamp_granularities",
            )
        if granularities and fmt is not TranscriptFormat.VERBOSE_JSON:
            raise InvalidRequest(
                "timestamp_granularities[] needs response_format verbose_json.",
                param="timestamp_granularities",
            )
        if task == "translate" and "word" in granularities:
            raise InvalidRequest(
                "timestamp_granularities[]: translations have no word timestamps.",
                param="timestamp_granularities",
            )
        if task == "translate" and fmt is TranscriptFormat.DIARIZED_JSON:
            raise InvalidRequest(
                "response_format: translations have no diarized_json.", param="response_format"
            )
        stream = _boolean(fields.get("stream"), "stream")
        if stream and fmt not in (TranscriptFormat.JSON, TranscriptFormat.TEXT):
            raise InvalidRequest("stream: only the json and text formats stream.", param="stream")
        timed = fmt in (TranscriptFormat.SRT, TranscriptFormat.VTT, TranscriptFormat.VERBOSE_JSON)
        options = TranscribeOptions(
            language=parse_language(fields.get("language"), languages),
            task=task,
            timestamps=timed,
            word_timestamps="word" in granularities,
            prompt=fields.get("prompt") or None,
            temperature=_temperature(fields.get("temperature")),
            model=parse_model(fields.get("model"), models, "model", OPENAI_TRANSCRIPTION_MODELS),
        )
        return cls(options, fmt, granularities, stream)


def _choice(value: str, choices: type[TranscriptFormat], param: str) -> TranscriptFormat:
    try:
        return choices(value)
    except ValueError:
        allowed = ", ".join(choice.value for choice in choices)
        raise InvalidRequest(f"{param}: {value!r} is not one of {allowed}.", param=param) from None


def _boolean(value: str | None, param: str) -> bool:
    if value is None or value.strip().lower() in ("", "false", "0"):
        return False
    if value.strip().lower() in ("true", "1"):
        return True
    raise InvalidRequest(f"{param}: {value!r} is not true or false.", param=param)


def _temperature(value: str | None) -> float:
    if value is None or not value.strip():
        return 0.0
    try:
        temperature = float(value)
    except ValueError:
        temperature = math.nan
    if not 0.0 <= temperature <= 1.0:
        raise InvalidRequest(
            f"temperature: {value!r} is not a number from 0 to 1.", param="temperature"
        )
    return temperature


@router.get(
    "/models",
    summary="List the model names (OpenAI's models.list)",
    responses=openai_error_responses(),
)
async def models(context: Context, _principal: Authenticated) -> ModelList:
    return ModelList(data=[Model(id=name) for name in _model_names(context)])


@router.get(
    "/models/{model_id}",
    summary="One model name (OpenAI's models.retrieve)",
    responses=openai_error_responses(404),
)
async def model(
    model_id: Annotated[str, Path(openapi_examples={"whisper-1": {"value": "whisper-1"}})],
    context: Context,
    _principal: Authenticated,
) -> Model:
    if model_id not in _model_names(context):
        raise NotFound(f"No model {model_id!r}; GET /v1/models lists them.", param="model")
    return Model(id=model_id)


def _model_names(context: Context) -> tuple[str, ...]:
    """OpenAI's names (the voice chooses the speech engine; the transcription ones are the
    default model), then this node's transcription models."""
    return (*TTS_MODELS, *OPENAI_TRANSCRIPTION_MODELS, *offered_models(context))
