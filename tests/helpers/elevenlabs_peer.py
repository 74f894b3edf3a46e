"""A protocol peer for ElevenLabs' HTTP API, as moto is for S3: the hosted service cannot run
here, so the tests talk to this instead. Shapes follow ElevenLabs' OpenAPI document
(elevenlabs/elevenlabs-docs, fern/apis/api/openapi.json) and its error-messages page.

What it answers:
- `POST /v1/text-to-speech/{voice_id}` and `.../stream`: real audio (a sine sweep lasting
  `SECONDS_PER_CHARACTER` per character of text) as MP3 frames or raw s16le PCM at the rate the
  `output_format` names; the stream variant in several chunks.
- `POST /v1/text-to-speech/{voice_id}/with-timestamps`: that audio in base64 and its
  `alignment`, each character `SECONDS_PER_CHARACTER` long, in order.
- `POST /v1/speech-to-text`: the documented transcript JSON, saying `transcript_text`; with
  `diarize=true` each word carries a `speaker_id`, the sentences taking turns among
  `num_speakers` (2 unless given) people.
- `POST /v1/voices/add`, `GET` and `DELETE /v1/voices/{voice_id}`: an in-memory voice store.

Errors come in ElevenLabs' two wire shapes: `{"detail": {"status", "message"}}` for its own
errors, and FastAPI's `{"detail": [{"type", "loc", "msg", "input"}]}` with 422 for request
validation (its API is a FastAPI app; the OpenAPI document declares that 422 on every route).

`elevenlabs_peer()` serves it with uvicorn on a loopback port, in a daemon thread, so tests stay
plain sync functions.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import random
import socket
import string
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import av
import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.helpers.ports import free_port

SECONDS_PER_CHARACTER = 0.06
DEFAULT_OUTPUT_FORMAT = "mp3_44100_128"
DEFAULT_TRANSCRIPT = "hello from the peer"
# ElevenLabs answers ISO 639-3 ("The detected language code (e.g. 'eng' for English)").
DEFAULT_DETECTED_LANGUAGE = "eng"
RACHEL = "21m00Tcm4TlvDq8ikWAM"  # the voice id in ElevenLabs' own examples
PREMADE_VOICES = {RACHEL: "Rachel", "JBFqnCBsd6RMkjVDRZzb": "George"}

# output_format -> (sample rate, MP3 kbit/s); the documented MP3 and PCM values.
MP3_FORMATS = {
    "mp3_22050_32": (22050, 32),
    "mp3_24000_48": (24000, 48),
    "mp3_44100_32": (44100, 32),
    "mp3_44100_64": (44100, 64),
    "mp3_44100_96": (44100, 96),
    "mp3_44100_128": (44100, 128),
    "mp3_44100_192": (44100, 192),
}
PCM_FORMATS = {f"pcm_{rate}": rate for rate in (8000, 16000, 22050, 24000, 32000, 44100, 48000)}
OUTPUT_FORMATS = (*MP3_FORMATS, *PCM_FORMATS)

# Request language codes given as ISO 639-1, answered in ISO 639-3 like the service does.
_ISO_639_3 = {
    "en": "eng", "de": "deu", "es": "spa", "fr": "fra", "it": "ita", "ja": "jpn",
    "nl": "nld", "pl": "pol", "pt": "por", "ru": "rus", "zh": "zho",
}  # fmt: skip

# status -> ElevenLabs' error code and message for `fail_next`; the codes are the documented ones
# (error-messages page), the 429 and 500 messages as ElevenLabs words them.
_FAULTS = {
    400: ("max_character_limit_exceeded", "The text exceeds the character limit."),
    401: ("invalid_api_key", "Invalid API key"),
    403: ("only_for_creator+", "This feature is only available for Creator tier and above."),
    404: ("voice_not_found", "A voice with the voice_id was not found."),
    429: (
        "too_many_concurrent_requests",
        "Too many concurrent requests. Your current subscription is associated with a maximum "
        "of 2 concurrent requests (running in parallel).",
    ),
}
_SERVER_FAULT = ("something_went_wrong", "We are sorry, something went wrong.")
_STREAM_CHUNK_SECONDS = 0.25


@dataclass(frozen=True)
class PeerFile:
    """An uploaded file as the peer received it."""

    field: str
    filename: str
    size: int
    content_type: str


@dataclass(frozen=True)
class PeerRequest:
    """One request as it reached the peer. Header names are lower case."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any = None
    form: dict[str, str] = field(default_factory=dict)
    files: tuple[PeerFile, ...] = ()


@dataclass
class PeerVoice:
    voice_id: str
    name: str
    category: str  # "premade" or "cloned", as ElevenLabs names them
    description: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    files: tuple[PeerFile, ...] = ()
    remove_background_noise: bool = False


@dataclass(frozen=True)
class _Fault:
    status: int
    code: str | None
    message: str | None


Handler = Callable[[Request], Awaitable[Response]]


class ElevenLabsPeer:
    """The peer's state, which tests read and steer from their own thread; `app` serves it.

    `requests`: every request that reached a route, in order of arrival, recorded before it is
    answered. `voices`: the voice store, the premade voices and those added. `transcript_text`
    and `detected_language` (ISO 639-3): what speech-to-text answers when the request names no
    language."""

    def __init__(self, api_key: str, base_url: str) -> None:
        self.api_key = api_key
        self.base_url = base_url
        self.requests: list[PeerRequest] = []
        self.voices: dict[str, PeerVoice] = {}
        self.transcript_text = DEFAULT_TRANSCRIPT
        self.detected_language = DEFAULT_DETECTED_LANGUAGE
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        self._ids = random.Random()
        self.reset()
        self._started = threading.Event()
        guarded = self._guarded
        self.app = Starlette(
            routes=[
                Route("/v1/text-to-speech/{voice_id}", guarded(self._speech), methods=["POST"]),
                Route(
                    "/v1/text-to-speech/{voice_id}/stream", guarded(self._stream), methods=["POST"]
                ),
                Route(
                    "/v1/text-to-speech/{voice_id}/with-timestamps",
                    guarded(self._with_timestamps),
                    methods=["POST"],
                ),
                Route("/v1/speech-to-text", guarded(self._transcribe), methods=["POST"]),
                Route("/v1/voices/add", guarded(self._add_voice), methods=["POST"]),
                Route("/v1/voices/{voice_id}", guarded(self._voice), methods=["GET", "DELETE"]),
            ],
            exception_handlers={HTTPException: _fastapi_http_error},
            lifespan=self._lifespan,
        )

    def reset(self) -> None:
        """Back to the state of a fresh peer, for a peer shared by several tests."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self.voices.clear()
            self.voices.update(
                (voice_id, PeerVoice(voice_id, name, "premade"))
                for voice_id, name in PREMADE_VOICES.items()
            )
            self.transcript_text = DEFAULT_TRANSCRIPT
            self.detected_language = DEFAULT_DETECTED_LANGUAGE
            self._ids.seed(0)  # voice ids the same from run to run

    def fail_next(
        self, status: int, n: int = 1, *, code: str | None = None, message: str | None = None
    ) -> None:
        """Answer the next `n` requests, whatever they are, with `status` and ElevenLabs' error
        body; `code` and `message` replace the documented ones (e.g. 429 "system_busy")."""
        with self._lock:
            self._faults.extend([_Fault(status, code, message)] * n)

    @asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self._started.set()
        yield

    def _guarded(self, handler: Handler) -> Handler:
        """Record the request, then answer a pending fault, then check the key, in that order."""

        async def endpoint(request: Request) -> Response:
            await self._record(request)
            with self._lock:
                fault = self._faults.pop(0) if self._faults else None
            if fault is not None:
                return _fault_response(fault)
            if request.headers.get("xi-api-key") != self.api_key:
                return error(401, "invalid_api_key", "Invalid API key")
            return await handler(request)

        return endpoint

    async def _record(self, request: Request) -> None:
        content_type = request.headers.get("content-type", "")
        body: Any = None
        form: dict[str, str] = {}
        files: list[PeerFile] = []
        if content_type.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
            for name, value in (await request.form()).multi_items():
                if isinstance(value, UploadFile):
                    files.append(_peer_file(name, value))
                else:
                    form[name] = value
        elif content_type.startswith("application/json"):
            try:
                body = await request.json()
            except ValueError:
                body = None
        record = PeerRequest(
            request.method,
            request.url.path,
            dict(request.query_params),
            {name.lower(): value for name, value in request.headers.items()},
            body,
            form,
            tuple(files),
        )
        with self._lock:
            self.requests.append(record)

    async def _speech(self, request: Request) -> Response:
        checked = await self._speech_request(request)
        if isinstance(checked, Response):
            return checked
        text, output_format = checked
        return Response(b"".join(synthesize(text, output_format)), media_type=_media(output_format))

    async def _stream(self, request: Request) -> Response:
        checked = await self._speech_request(request)
        if isinstance(checked, Response):
            return checked
        text, output_format = checked

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in synthesize(text, output_format):
                yield chunk
                await asyncio.sleep(0)  # each chunk its own write, as a live stream sends it

        return StreamingResponse(chunks(), media_type=_media(output_format))

    async def _with_timestamps(self, request: Request) -> Response:
        checked = await self._speech_request(request)
        if isinstance(checked, Response):
            return checked
        text, output_format = checked
        audio = b"".join(synthesize(text, output_format))
        # Each character takes SECONDS_PER_CHARACTER of the sweep, in order.
        starts = [round(i * SECONDS_PER_CHARACTER, 3) for i in range(len(text))]
        ends = [round((i + 1) * SECONDS_PER_CHARACTER, 3) for i in range(len(text))]
        alignment = {
            "characters": list(text),
            "character_start_times_seconds": starts,
            "character_end_times_seconds": ends,
        }
        return JSONResponse(
            {
                "audio_base64": base64.b64encode(audio).decode(),
                "alignment": alignment,
                "normalized_alignment": alignment,
            }
        )

    async def _speech_request(self, request: Request) -> tuple[str, str] | Response:
        """The text and output format of a valid speech request, or the answer to one that isn't."""
        output_format = request.query_params.get("output_format", DEFAULT_OUTPUT_FORMAT)
        problems = []
        if output_format not in OUTPUT_FORMATS:
            problems.append(
                _enum_problem(("query", "output_format"), output_format, OUTPUT_FORMATS)
            )
        try:
            body = await request.json()
        except ValueError as exc:
            problems.append(_problem("json_invalid", ("body", 0), "JSON decode error", str(exc)))
            return validation_error(problems)
        if not isinstance(body, dict):
            problems.append(
                _problem(
                    "model_attributes_type", ("body",), "Input should be a valid dictionary", body
                )
            )
        elif "text" not in body:
            problems.append(_problem("missing", ("body", "text"), "Field required", body))
        elif not isinstance(body["text"], str):
            problems.append(
                _problem(
                    "string_type", ("body", "text"), "Input should be a valid string", body["text"]
                )
            )
        if problems:
            return validation_error(problems)
        voice_id = request.path_params["voice_id"]
        if voice_id not in self.voices:
            return voice_not_found(voice_id)
        return str(body["text"]), output_format

    async def _transcribe(self, request: Request) -> Response:
        form = await request.form()
        problems = []
        model_id = form.get("model_id")
        if not isinstance(model_id, str) or not model_id:
            problems.append(_problem("missing", ("body", "model_id"), "Field required", None))
        granularity = form.get("timestamps_granularity", "word")
        if granularity not in ("none", "word", "character"):
            problems.append(
                _enum_problem(
                    ("body", "timestamps_granularity"), granularity, ("none", "word", "character")
                )
            )
        if problems:
            return validation_error(problems)
        upload = form.get("file")
        url = form.get("cloud_storage_url")
        if isinstance(upload, UploadFile) == bool(url):
            return error(
                400,
                "invalid_parameters",
                "Exactly one of the file or cloud_storage_url parameters must be provided.",
            )
        duration = None
        if isinstance(upload, UploadFile):
            data = await upload.read()
            if not data:
                return error(400, "invalid_content", "The uploaded file is empty.")
            duration = _probe_seconds(data)
        given = form.get("language_code")
        language = (
            _ISO_639_3.get(given, given)
            if isinstance(given, str) and given
            else self.detected_language
        )
        words = _words(self.transcript_text, duration, str(granularity))
        if form.get("diarize") == "true":
            _take_turns(words, int(str(form.get("num_speakers") or 2)))
        return JSONResponse(
            {
                "language_code": language,
                "language_probability": 1.0 if given else 0.98,
                "text": self.transcript_text,
                "words": words,
            }
        )

    async def _add_voice(self, request: Request) -> Response:
        form = await request.form()
        problems = []
        name = form.get("name")
        if not isinstance(name, str) or not name:
            problems.append(_problem("missing", ("body", "name"), "Field required", None))
        uploads = [item for item in form.getlist("files") if isinstance(item, UploadFile)]
        if not uploads:
            problems.append(_problem("missing", ("body", "files"), "Field required", None))
        labels = _labels(form.get("labels"))
        if labels is None:
            problems.append(
                _problem(
                    "value_error",
                    ("body", "labels"),
                    "Labels must be a serialized dictionary of strings",
                    form.get("labels"),
                )
            )
        denoise = _form_bool(form.get("remove_background_noise"))
        if denoise is None:
            problems.append(
                _problem(
                    "bool_parsing",
                    ("body", "remove_background_noise"),
                    "Input should be a valid boolean, unable to interpret input",
                    form.get("remove_background_noise"),
                )
            )
        if problems:
            return validation_error(problems)
        description = form.get("description")
        voice = PeerVoice(
            self._new_voice_id(),
            str(name),
            "cloned",
            description if isinstance(description, str) else None,
            labels or {},
            tuple(_peer_file("files", upload) for upload in uploads),
            bool(denoise),
        )
        self.voices[voice.voice_id] = voice
        return JSONResponse({"voice_id": voice.voice_id, "requires_verification": False})

    async def _voice(self, request: Request) -> Response:
        # One route for both methods, so a 405 there names them both in Allow.
        if request.method == "DELETE":
            return await self._delete_voice(request)
        return await self._get_voice(request)

    async def _get_voice(self, request: Request) -> Response:
        voice = self.voices.get(request.path_params["voice_id"])
        if voice is None:
            return voice_not_found(request.path_params["voice_id"])
        return JSONResponse(
            {
                "voice_id": voice.voice_id,
                "name": voice.name,
                "category": voice.category,
                "labels": voice.labels,
                "description": voice.description,
                "samples": [
                    {
                        "sample_id": f"{voice.voice_id}-{index}",
                        "file_name": sample.filename,
                        "mime_type": sample.content_type,
                        "size_bytes": sample.size,
                    }
                    for index, sample in enumerate(voice.files)
                ]
                or None,
                "available_for_tiers": [],
                "high_quality_base_model_ids": [],
            }
        )

    async def _delete_voice(self, request: Request) -> Response:
        voice_id = request.path_params["voice_id"]
        if self.voices.pop(voice_id, None) is None:
            return voice_not_found(voice_id)
        return JSONResponse({"status": "ok"})

    def _new_voice_id(self) -> str:
        alphabet = string.ascii_letters + string.digits
        while True:
            voice_id = "".join(self._ids.choices(alphabet, k=20))  # ElevenLabs' id length
            if voice_id not in self.voices:
                return voice_id


def error(status: int, code: str, message: str) -> JSONResponse:
    """ElevenLabs' own error shape."""
    return JSONResponse({"detail": {"status": code, "message": message}}, status_code=status)


def voice_not_found(voice_id: str) -> JSONResponse:
    return error(404, "voice_not_found", f"A voice with the voice_id {voice_id} was not found.")


def validation_error(problems: list[dict[str, Any]]) -> JSONResponse:
    """FastAPI's request validation shape, as ElevenLabs (a FastAPI app) answers it."""
    return JSONResponse({"detail": problems}, status_code=422)


def _problem(kind: str, loc: tuple[str | int, ...], msg: str, given: object) -> dict[str, Any]:
    if isinstance(given, UploadFile):  # a file where a field was expected: name it, as JSON can
        given = given.filename
    return {"type": kind, "loc": list(loc), "msg": msg, "input": given}


def _enum_problem(loc: tuple[str, ...], given: object, allowed: tuple[str, ...]) -> dict[str, Any]:
    expected = ", ".join(f"'{value}'" for value in allowed)
    return _problem("enum", loc, f"Input should be {expected}", given)


def _fault_response(fault: _Fault) -> JSONResponse:
    if fault.status == 422 and fault.code is None:
        return validation_error([_problem("value_error", ("body",), "Injected fault", None)])
    default = _FAULTS.get(
        fault.status, _SERVER_FAULT if fault.status >= 500 else ("error", "Error")
    )
    return error(fault.status, fault.code or default[0], fault.message or default[1])


async def _fastapi_http_error(request: Request, exc: Exception) -> Response:
    """Unknown paths and methods answered as FastAPI does: JSON, not Starlette's plain text."""
    assert isinstance(exc, HTTPException)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


def _peer_file(name: str, upload: UploadFile) -> PeerFile:
    return PeerFile(
        name,
        upload.filename or "",
        upload.size or 0,
        upload.content_type or "application/octet-stream",
    )


def _labels(raw: object) -> dict[str, str] | None:
    """A serialized labels dictionary ({} when absent), or None when it isn't one."""
    if raw is None or raw == "":
        return {}
    try:
        labels = json.loads(str(raw))
    except ValueError:
        return None
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        return None
    return {str(key): value for key, value in labels.items()}


def _form_bool(raw: object) -> bool | None:
    if raw is None:
        return False
    value = str(raw).lower()
    if value in ("true", "1", "yes", "on", "t", "y"):
        return True
    if value in ("false", "0", "no", "off", "f", "n"):
        return False
    return None


def _media(output_format: str) -> str:
    # PCM is sent as audio/pcm (seen on the wire: Andrewcpu/elevenlabs-api#17); MP3 as documented.
    return "audio/mpeg" if output_format in MP3_FORMATS else "audio/pcm"


def speech_seconds(text: str) -> float:
    return len(text) * SECONDS_PER_CHARACTER


def _sweep(text: str, rate: int) -> np.ndarray[Any, np.dtype[np.int16]]:
    """A 200 -> 800 Hz sine sweep, SECONDS_PER_CHARACTER long per character, as s16 mono."""
    samples = len(text) * round(rate * SECONDS_PER_CHARACTER)
    seconds = max(samples / rate, 1e-9)
    t = np.arange(samples) / rate
    phase = 2 * np.pi * (200 * t + 300 * t * t / seconds)
    return (0.3 * 32767 * np.sin(phase)).astype(np.int16)


def synthesize(text: str, output_format: str) -> list[bytes]:
    """The audio for `text` in chunks of about a quarter second, each whole MP3 frames or whole
    PCM samples; joined, they are the complete body."""
    if output_format in PCM_FORMATS:
        rate = PCM_FORMATS[output_format]
        pcm = _sweep(text, rate).tobytes()
        step = round(rate * _STREAM_CHUNK_SECONDS) * 2
        return [pcm[start : start + step] for start in range(0, len(pcm), step)]
    rate, kbps = MP3_FORMATS[output_format]
    return _mp3_chunks(_sweep(text, rate), rate, kbps)


def _mp3_chunks(signal: np.ndarray[Any, np.dtype[np.int16]], rate: int, kbps: int) -> list[bytes]:
    """Bare MP3 frames (no ID3 tag or Xing header), as a stream carries them."""
    codec = av.CodecContext.create("libmp3lame", "w")
    assert isinstance(codec, av.AudioCodecContext)
    codec.sample_rate = rate
    codec.layout = "mono"
    codec.format = "s16p"
    codec.bit_rate = kbps * 1000
    codec.open()
    frame_size = codec.frame_size
    packets: list[bytes] = []
    for start in range(0, len(signal), frame_size):
        frame = av.AudioFrame.from_ndarray(
            signal[None, start : start + frame_size], format="s16p", layout="mono"
        )
        frame.sample_rate = rate
        frame.pts = start
        packets.extend(bytes(packet) for packet in codec.encode(frame))
    packets.extend(bytes(packet) for packet in codec.encode(None))
    per_chunk = max(1, round(rate * _STREAM_CHUNK_SECONDS / frame_size))
    return [b"".join(packets[i : i + per_chunk]) for i in range(0, len(packets), per_chunk)]


def _probe_seconds(data: bytes) -> float | None:
    """The decoded length of an uploaded file, or None where PyAV can't read it."""
    try:
        with av.open(io.BytesIO(data), "r") as container:
            stream = container.streams.audio[0]
            samples = sum(frame.samples for frame in container.decode(stream))
            return samples / stream.rate if stream.rate else None
    except (av.FFmpegError, IndexError):
        return None


def _words(text: str, duration: float | None, granularity: str) -> list[dict[str, Any]]:
    """Words and the spacing between them, in equal slots across the audio (or at
    SECONDS_PER_CHARACTER per character when its length is unknown)."""
    tokens = text.split()
    if not tokens:
        return []
    total = duration if duration else speech_seconds(text)
    slot = total / len(tokens)
    words: list[dict[str, Any]] = []
    for index, token in enumerate(tokens):
        start, end = index * slot, index * slot + slot * 0.8
        if index:
            words.append(_word(" ", "spacing", words[-1]["end"], start, granularity))
        words.append(_word(token, "word", start, end, granularity))
    return words


def _take_turns(words: list[dict[str, Any]], speakers: int) -> None:
    """Each sentence's words (and the spacing before them) said by the next person."""
    sentence = 0
    for word in words:
        word["speaker_id"] = f"speaker_{sentence % speakers}"
        if word["type"] == "word" and word["text"].endswith((".", "?", "!")):
            sentence += 1


def _word(text: str, kind: str, start: float, end: float, granularity: str) -> dict[str, Any]:
    timed = granularity != "none"
    word: dict[str, Any] = {
        "text": text,
        "start": round(start, 3) if timed else None,
        "end": round(end, 3) if timed else None,
        "type": kind,
        "logprob": 0.0,
    }
    if granularity == "character":
        step = (end - start) / len(text)
        word["characters"] = [
            {
                "text": char,
                "start": round(start + i * step, 3),
                "end": round(start + (i + 1) * step, 3),
            }
            for i, char in enumerate(text)
        ]
    return word


@contextmanager
def elevenlabs_peer(api_key: str = "xi-test-key") -> Iterator[ElevenLabsPeer]:
    """The peer, served on 127.0.0.1 until the block ends; `base_url` has no /v1."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", free_port()))
    listener.listen(128)  # bound and listening before uvicorn starts: no connect can be refused
    host, port = listener.getsockname()
    peer = ElevenLabsPeer(api_key, f"http://{host}:{port}")
    server = uvicorn.Server(
        uvicorn.Config(
            peer.app,
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="elevenlabs-peer", daemon=True
    )
    thread.start()
    try:
        while not peer._started.wait(0.1):
            assert thread.is_alive(), "the ElevenLabs peer did not start"
        yield peer
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()
