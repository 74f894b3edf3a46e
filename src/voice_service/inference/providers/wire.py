"""What each kind of provider is sent and answers: OpenAI's audio API (which vLLM, speaches,
Kokoro-FastAPI, faster-whisper-server and Voice Service's own /v1 speak) and ElevenLabs'.

Pure translation between our requests and theirs, no I/O: `provider.Provider` sends what
these build and hands back what they parse. A parser raises `Garbage` for an answer that is
not what the protocol promises, which counts as the replica failing.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, runtime_checkable
from urllib.parse import quote

import httpx

from voice_service.audio.encode import FORMATS, MP3, AudioFormat, OutputFormat
from voice_service.audio.formats import UploadFormat
from voice_service.audio.output_formats import format_name
from voice_service.engines.alignment import Alignment
from voice_service.engines.protocols import Segment, TranscribeOptions, Word
from voice_service.inference.providers.languages import to_iso_639_1

# Answers are read whole only when they are JSON; a transcript of 30 minutes is far below.
MAX_JSON_BYTES = 16 * 1024 * 1024
PCM_RATE = 24_000  # the raw PCM asked of a provider when ours must re-encode it
# The model OpenAI tells speakers apart with (its answer: `diarized_json`).
DIARIZING_MODEL = "gpt-4o-transcribe-diarize"

# Characters per second of the slowest speech a provider makes (people say about 15).
SLOWEST_SPEECH = 5.0
# Seconds of audio any text may take beyond its characters' (pauses, a short text's breath).
SPEECH_MARGIN_SECONDS = 10.0
# A second of audio in a format that fixes neither its rate nor its bitrate is at most this
# many bytes: 48 kHz 16-bit PCM, or 320 kbit/s compressed.
_MOST_PCM_RATE = 48_000
_MOST_LOSSY_BITRATE = 320_000
# A character's share of an alignment: `"x",` and two times of up to 17 digits each.
_ALIGNMENT_BYTES = 64
# Room for a container's headers (MP3's ID3 and Xing, WAV's RIFF, Ogg's pages).
_HEADER_BYTES = 64 * 1024


class Garbage(Exception):
    """The answer is not what the protocol promises (wrong type, unparsable, missing keys)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request to a replica: its path is appended to the replica's base URL."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    json: dict[str, Any] | None = None
    data: dict[str, str | list[str]] | None = None
    files: list[tuple[str, tuple[str, bytes, str]]] | None = None


@dataclass(frozen=True, slots=True)
class RemoteTranscript:
    text: str
    language: str | None  # ISO 639-1, or None when the provider did not say
    segments: tuple[Segment, ...]


@dataclass(frozen=True, slots=True)
class AudioFile:
    name: str
    content: bytes
    media_type: str


@dataclass(frozen=True, slots=True)
class SpeechCall:
    """A speech request, and the audio it answers with: `fmt` itself (passed through), or
    raw 16-bit PCM at `PCM_RATE` that we encode into the client's format."""

    call: Call
    passthrough: bool
    media_types: tuple[str, ...]  # the Content-Types a good answer may have
    max_bytes: int  # the most audio an honest answer to this text holds


def speech_bytes(characters: int, fmt: AudioFormat, speed: float = 1.0) -> int:
    """The most bytes of `fmt` that speaking `characters` can honestly take: the slowest
    speech, at the slowest `speed` asked, at the format's bit rate (the most any such
    format has where it fixes none)."""
    seconds = SPEECH_MARGIN_SECONDS + characters / SLOWEST_SPEECH / min(speed, 1.0)
    if fmt.lossy:
        per_second = (fmt.bitrate or _MOST_LOSSY_BITRATE) // 8
    else:
        per_second = (fmt.sample_rate or _MOST_PCM_RATE) * 2
    return math.ceil(seconds * per_second) + _HEADER_BYTES


def timed_speech_bytes(characters: int, fmt: AudioFormat) -> int:
    """The most bytes of a timed answer (JSON: the audio in base64, and per character its
    text and two times)."""
    return speech_bytes(characters, fmt) * 4 // 3 + _ALIGNMENT_BYTES * characters


class Wire(Protocol):
    """A kind of provider: its protocol, and what the kind can be asked for."""

    # Where it is when a provider's `base_urls` are left out: the hosted API.
    default_base_urls: ClassVar[tuple[str, ...]]
    # The model it tells speakers apart with when asked for them (`diarize`), which then
    # takes no count of speakers, no prompt and gives no word times; None: the kind's own
    # transcription model tells them apart and takes every hint.
    diarizing_model: ClassVar[str | None]

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def transcription(
        self, audio: AudioFile, options: TranscribeOptions, model: str | None
    ) -> Call: ...

    def parse_transcription(
        self, response: httpx.Response, options: TranscribeOptions, duration: float
    ) -> RemoteTranscript: ...

    def speech(
        self, voice: str, text: str, fmt: AudioFormat, speed: float, model: str | None
    ) -> SpeechCall: ...


@runtime_checkable
class CloningWire(Protocol):
    """A kind whose providers make instant clones of samples."""

    def add_voice(self, name: str, description: str | None, sample: AudioFile) -> Call: ...

    def parse_added_voice(self, response: httpx.Response) -> str: ...

    def delete_voice(self, voice_id: str) -> Call: ...


@runtime_checkable
class TimedWire(Protocol):
    """A kind whose speech says when each character is spoken."""

    def timed_speech(self, voice: str, text: str, fmt: AudioFormat, model: str | None) -> Call: ...

    def parse_timed_speech(
        self, response: httpx.Response, text: str
    ) -> tuple[bytes, Alignment]: ...


class OpenAIWire:
    """OpenAI's `/audio/transcriptions`, `/audio/translations` and `/audio/speech`; base URLs
    end in `/v1`."""

    default_base_urls: ClassVar[tuple[str, ...]] = ("https://api.openai.com/v1",)
    diarizing_model: ClassVar[str | None] = DIARIZING_MODEL

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def transcription(
        self, audio: AudioFile, options: TranscribeOptions, model: str | None
    ) -> Call:
        files = [("file", (audio.name, audio.content, audio.media_type))]
        if options.diarize:
            return Call(
                "POST", "/audio/transcriptions", data=_diarizing(options, model), files=files
            )
        # json when nothing but the text is needed (every server has it); verbose_json to
        # learn the language or the times.
        verbose = options.language is None or options.timestamps or options.word_timestamps
        data: dict[str, str | list[str]] = {
            "model": model or "whisper-1",
            "response_format": "verbose_json" if verbose else "json",
            "temperature": str(options.temperature),
        }
        if options.language is not None and options.task == "transcribe":
            data["language"] = options.language
        if options.prompt:
            data["prompt"] = options.prompt
        if options.word_timestamps:
            data["timestamp_granularities[]"] = ["word", "segment"]
        path = "/audio/translations" if options.task == "translate" else "/audio/transcriptions"
        return Call("POST", path, data=data, files=files)

    def parse_transcription(
        self, response: httpx.Response, options: TranscribeOptions, duration: float
    ) -> RemoteTranscript:
        body, text = _transcript(response)
        if options.diarize:  # diarized_json: no language, no words
            diarized = _diarized_segments(body.get("segments"), duration)
            return RemoteTranscript(
                text.strip(), None, diarized or (Segment(text.strip(), 0.0, duration),)
            )
        language = body.get("language")
        language_code = to_iso_639_1(language) if isinstance(language, str) else None
        segments = tuple(_openai_segments(body.get("segments"), duration))
        words = tuple(_words(body.get("words"), "word"))
        if not segments:
            segments = (Segment(text.strip(), 0.0, duration),)
        if words:  # OpenAI lists words beside the segments; ours hang off each segment
            segments = _with_words(segments, words)
        return RemoteTranscript(text.strip(), language_code, segments)

    def speech(
        self, voice: str, text: str, fmt: AudioFormat, speed: float, model: str | None
    ) -> SpeechCall:
        # OpenAI's own formats come through as made; others are made here from its PCM.
        name = next((name for name, known in FORMATS.items() if known == fmt), None)
        body = {
            "model": model or "tts-1",
            "voice": voice,
            "input": text,
            "response_format": (name or OutputFormat.PCM).value,
            "speed": speed,
        }
        call = Call("POST", "/audio/speech", json=body)
        made = fmt if name is not None else _PCM
        return SpeechCall(
            call, name is not None, _AUDIO_TYPES, speech_bytes(len(text), made, speed)
        )


class ElevenLabsWire:
    """ElevenLabs' `/v1/text-to-speech/{voice_id}/stream`, `/v1/speech-to-text` and voices;
    base URLs are the API's root (`https://api.elevenlabs.io`)."""

    default_base_urls: ClassVar[tuple[str, ...]] = ("https://api.elevenlabs.io",)
    diarizing_model: ClassVar[str | None] = None

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"xi-api-key": api_key} if api_key else {}

    def transcription(
        self, audio: AudioFile, options: TranscribeOptions, model: str | None
    ) -> Call:
        data: dict[str, str | list[str]] = {
            "model_id": model or "scribe_v1",
            "timestamps_granularity": "word",
        }
        if options.language is not None:
            data["language_code"] = options.language
        if options.diarize:
            data["diarize"] = "true"
            if options.num_speakers is not None:
                data["num_speakers"] = str(options.num_speakers)
        files = [("file", (audio.name, audio.content, audio.media_type))]
        return Call("POST", "/v1/speech-to-text", data=data, files=files)

    def parse_transcription(
        self, response: httpx.Response, options: TranscribeOptions, duration: float
    ) -> RemoteTranscript:
        body, text = _transcript(response)
        language = body.get("language_code")
        language_code = to_iso_639_1(language) if isinstance(language, str) else None
        words = tuple(_words(body.get("words"), "text"))
        if options.diarize:
            return RemoteTranscript(text.strip(), language_code, _by_speaker(words, duration))
        segment = Segment(text.strip(), 0.0, duration, words if options.word_timestamps else ())
        return RemoteTranscript(text.strip(), language_code, (segment,))

    def speech(
        self, voice: str, text: str, fmt: AudioFormat, speed: float, model: str | None
    ) -> SpeechCall:
        body = _speech_body(text, model)
        # Its own formats come through as made; anything else, or another speed than
        # ElevenLabs' 0.7-1.2 allow, is made from its PCM here.
        name = _format_name(fmt)
        passthrough = name is not None and speed == 1.0
        output = name if name is not None and passthrough else f"pcm_{PCM_RATE}"
        path = f"/v1/text-to-speech/{_segment(voice)}/stream"
        call = Call("POST", path, params={"output_format": output}, json=body)
        limit = speech_bytes(len(text), fmt if passthrough else _PCM)  # made at speed 1 there
        return SpeechCall(call, passthrough, _AUDIO_TYPES, limit)

    def timed_speech(self, voice: str, text: str, fmt: AudioFormat, model: str | None) -> Call:
        """`/with-timestamps`: the audio, in base64, and when each character is spoken. The
        timed endpoints take ElevenLabs' own formats only, so `fmt` is made there."""
        name = _format_name(fmt)
        assert name is not None, f"{fmt} has no ElevenLabs name"
        body = _speech_body(text, model)
        path = f"/v1/text-to-speech/{_segment(voice)}/with-timestamps"
        return Call("POST", path, params={"output_format": name}, json=body)

    def parse_timed_speech(self, response: httpx.Response, text: str) -> tuple[bytes, Alignment]:
        body = _json_object(response)
        audio = body.get("audio_base64")
        if not isinstance(audio, str):
            raise Garbage("the answer has no audio_base64")
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise Garbage("audio_base64 is not base64") from None
        alignment = _alignment(body.get("alignment"))
        if alignment.characters and "".join(alignment.characters) != text:
            raise Garbage("alignment is not of the text it was sent")
        return data, alignment

    def add_voice(self, name: str, description: str | None, sample: AudioFile) -> Call:
        data: dict[str, str | list[str]] = {"name": name}
        if description:
            data["description"] = description
        files = [("files", (sample.name, sample.content, sample.media_type))]
        return Call("POST", "/v1/voices/add", data=data, files=files)

    def parse_added_voice(self, response: httpx.Response) -> str:
        voice_id = _json_object(response).get("voice_id")
        if not isinstance(voice_id, str) or not voice_id:
            raise Garbage("the answer names no voice_id")
        return voice_id

    def delete_voice(self, voice_id: str) -> Call:
        return Call("DELETE", f"/v1/voices/{_segment(voice_id)}")


# An upload as a provider gets it, named by its real format (OpenAI goes by the name).
UPLOAD_NAMES = {
    UploadFormat.MP3: ("audio.mp3", "audio/mpeg"),
    UploadFormat.WAV: ("audio.wav", "audio/wav"),
    UploadFormat.MP4: ("audio.m4a", "audio/mp4"),
    UploadFormat.WEBM: ("audio.webm", "audio/webm"),
    UploadFormat.OGG: ("audio.ogg", "audio/ogg"),
    UploadFormat.FLAC: ("audio.flac", "audio/flac"),
}

_PCM = FORMATS[OutputFormat.PCM]  # 16-bit at PCM_RATE
assert _PCM.sample_rate == PCM_RATE

# Servers label audio loosely (ElevenLabs' PCM is application/octet-stream); what is never
# audio is a page or a JSON error with a 200.
_AUDIO_TYPES = ("audio/", "application/octet-stream", "binary/octet-stream")


# The kinds of provider, by the name a providers file gives `kind`: adding one is its
# `Wire` and a row here.
WIRES: dict[str, type[Wire]] = {"openai": OpenAIWire, "elevenlabs": ElevenLabsWire}


def kinds_that(can: Callable[[type[Wire]], bool]) -> str:
    """The kinds that `can`, as a providers file names them (for its error messages)."""
    return " or ".join(f'kind = "{kind}"' for kind, wire in WIRES.items() if can(wire))


def error_message(response: httpx.Response) -> str:
    """The provider's own words for a refusal (OpenAI's `error.message`, ElevenLabs'
    `detail.message`), else the start of its body: for the operator's log only (they may
    quote credentials; see `redaction`)."""
    head = response.content[:65536]
    try:
        body = json.loads(head)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return head[:1000].decode("utf-8", "replace")
    message: object = None
    if isinstance(body, dict):
        error = body.get("error")
        detail = body.get("detail")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(detail, dict):
            message = detail.get("message")
        elif isinstance(detail, (str, list)):
            message = detail
        else:
            message = body.get("message") or error
    if isinstance(message, str):
        return message
    return head[:1000].decode("utf-8", "replace")


def _transcript(response: httpx.Response) -> tuple[dict[str, Any], str]:
    """A transcription's answer, and its text."""
    body = _json_object(response)
    text = body.get("text")
    if not isinstance(text, str):
        raise Garbage("the transcript has no text")
    return body, text


def _json_object(response: httpx.Response) -> dict[str, Any]:
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise Garbage(f"answered {shown_type(media_type)}, not JSON")
    try:
        body = json.loads(response.content)
    except RecursionError:  # nested deeper than Python's parser goes: no answer of the API
        raise Garbage("answered JSON nested too deep") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise Garbage(f"answered JSON that does not parse ({exc})") from None
    if not isinstance(body, dict):
        raise Garbage("answered JSON that is not an object")
    return body


def shown_type(media_type: str) -> str:
    """A Content-Type fit to repeat to a tenant: a plain `type/subtype`, nothing else the
    upstream wrote."""
    if not media_type:
        return "no content type"
    return media_type if _PLAIN_TYPE.fullmatch(media_type) else "an unusual content type"


_PLAIN_TYPE = re.compile(r"[a-z0-9][a-z0-9.+-]{0,40}/[a-z0-9][a-z0-9.+-]{0,60}")


def _openai_segments(raw: object, duration: float) -> list[Segment]:
    if not isinstance(raw, list):
        return []
    segments = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise Garbage("a segment has no text")
        start = _seconds(item.get("start"), 0.0)
        tokens = item.get("tokens")
        segments.append(
            Segment(
                item["text"].strip(),
                start,
                _seconds(item.get("end"), duration),
                tokens=tuple(t for t in tokens if isinstance(t, int))
                if isinstance(tokens, list)
                else (),
                avg_logprob=_seconds(item.get("avg_logprob"), 0.0, signed=True),
                compression_ratio=_seconds(item.get("compression_ratio"), 0.0),
                no_speech_prob=_seconds(item.get("no_speech_prob"), 0.0),
            )
        )
    return segments


def _with_words(segments: tuple[Segment, ...], words: tuple[Word, ...]) -> tuple[Segment, ...]:
    """Each word in the segment it starts in (the last one for words past every end)."""
    owned: list[list[Word]] = [[] for _ in segments]
    for word in words:
        index = next(
            (i for i, segment in enumerate(segments) if word.start < segment.end),
            len(segments) - 1,
        )
        owned[index].append(word)
    return tuple(
        replace(segment, words=tuple(mine)) for segment, mine in zip(segments, owned, strict=True)
    )


def _words(raw: object, text_key: str) -> list[Word]:
    if not isinstance(raw, list):
        return []
    words = []
    for item in raw:
        if not isinstance(item, dict) or item.get("type", "word") != "word":
            continue  # ElevenLabs lists the spacing and sound events between words too
        text = item.get(text_key)
        if isinstance(text, str):
            start = _seconds(item.get("start"), 0.0)
            speaker = item.get("speaker_id")
            spoken = speaker if isinstance(speaker, str) and speaker else None
            words.append(Word(text, start, _seconds(item.get("end"), start), spoken))
    return words


def _diarizing(options: TranscribeOptions, model: str | None) -> dict[str, str | list[str]]:
    """OpenAI's fields for a diarized transcript: its diarizing model (which takes no
    prompt), the audio cut into chunks as the model needs past 30 s."""
    data: dict[str, str | list[str]] = {
        "model": model or DIARIZING_MODEL,
        "response_format": "diarized_json",
        "chunking_strategy": "auto",
        "temperature": str(options.temperature),
    }
    if options.language is not None:
        data["language"] = options.language
    return data


def _diarized_segments(raw: object, duration: float) -> tuple[Segment, ...]:
    """diarized_json's segments, their speakers named speaker_0, speaker_1, … in order of
    first speech (OpenAI letters them A, B, …); one without a speaker has none (the node
    then tells the speakers apart itself)."""
    if not isinstance(raw, list):
        return ()
    names: dict[str, str] = {}
    segments = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise Garbage("a segment has no text")
        label = item.get("speaker")
        speaker = None
        if isinstance(label, str) and label:
            speaker = names.setdefault(label, f"speaker_{len(names)}")
        start = _seconds(item.get("start"), 0.0)
        end = min(_seconds(item.get("end"), duration), duration)
        segments.append(Segment(item["text"].strip(), start, end, speaker=speaker))
    return tuple(segments)


def _by_speaker(words: Sequence[Word], duration: float) -> tuple[Segment, ...]:
    """A diarized transcript's words in segments of one speaker each, the speakers named
    speaker_0, speaker_1, … in order of first speech (whatever ids the upstream gave)."""
    names: dict[str | None, str] = {}
    runs: list[list[Word]] = []
    for word in words:
        named = replace(word, speaker=names.setdefault(word.speaker, f"speaker_{len(names)}"))
        if runs and runs[-1][-1].speaker == named.speaker:
            runs[-1].append(named)
        else:
            runs.append([named])
    return tuple(
        Segment(
            " ".join(word.word.strip() for word in run),
            run[0].start,
            min(run[-1].end, duration),
            tuple(run),
            speaker=run[0].speaker,
        )
        for run in runs
    )


def _speech_body(text: str, model: str | None) -> dict[str, Any]:
    return {"text": text, "model_id": model or "eleven_multilingual_v2"}


def _format_name(fmt: AudioFormat) -> str | None:
    """ElevenLabs' name for `fmt`; our MP3 at the voice's rate is near enough its 44.1 kHz
    one."""
    return "mp3_44100_128" if fmt == MP3 else format_name(fmt)


def _alignment(raw: object) -> Alignment:
    """ElevenLabs' `alignment` (null for no characters)."""
    if raw is None:
        return Alignment()
    if not isinstance(raw, dict):
        raise Garbage("alignment is not an object")
    characters = raw.get("characters")
    starts = raw.get("character_start_times_seconds")
    ends = raw.get("character_end_times_seconds")
    if not (isinstance(characters, list) and isinstance(starts, list) and isinstance(ends, list)):
        raise Garbage("alignment lacks its characters or their times")
    if not len(characters) == len(starts) == len(ends):
        raise Garbage("alignment has not one start and one end per character")
    if not all(isinstance(character, str) for character in characters):
        raise Garbage("alignment's characters are not strings")
    times = [_seconds(time, math.nan) for time in (*starts, *ends)]
    if any(math.isnan(time) for time in times):
        raise Garbage("alignment's times are not seconds")
    count = len(characters)
    return Alignment(tuple(characters), tuple(times[:count]), tuple(times[count:]))


def _seconds(value: object, default: float, *, signed: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    number = float(value)
    if not math.isfinite(number) or (number < 0 and not signed):
        return default
    return number


def _segment(value: str) -> str:
    """`value` as one path segment (voice ids are the operator's or the provider's)."""
    return quote(value, safe="")
