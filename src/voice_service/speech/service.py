"""Text to speech: find the caller's voice, synthesize chunk by chunk in the pool, bill.

Every endpoint that speaks goes through `speech_chunks`, or `timed_speech` where it also
says when each character is spoken: the engines yield PCM per chunk of text, the encoder
turns each into bytes, and the caller either sends them as they come (streams) or joins
them into one file (the native /text-to-speech, with exact headers).
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Generic, TypeVar

from voice_service.audio.encode import MP3, AudioEncoder, AudioFormat
from voice_service.books.ledger import Ledger
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import InvalidRequest, NotFound, ProviderError
from voice_service.core.models import Voice
from voice_service.core.vocabulary import Capability, UsageEndpoint
from voice_service.engines import ssml
from voice_service.engines.alignment import Alignment, TextTimer
from voice_service.engines.continuity import context_of
from voice_service.engines.deadline import Deadline
from voice_service.engines.manner import PLAIN, Manner
from voice_service.engines.protocols import EngineError, UnknownVoice
from voice_service.engines.ssml import InvalidSsml, Script, is_ssml
from voice_service.inference import resolver
from voice_service.inference.admission import Job
from voice_service.inference.engines import Engines, SpokenChunk
from voice_service.inference.providers.table import ProviderVoice
from voice_service.inference.providers.wire import SLOWEST_SPEECH
from voice_service.pronunciation.service import with_dictionaries
from voice_service.runtime import Runtime
from voice_service.speech.schemas import SpeechRequest
from voice_service.speech.stitching import remember, stitched
from voice_service.tenancy.principal import Principal
from voice_service.voices.listing import clone_languages
from voice_service.voices.service import find_voice

logger = logging.getLogger(__name__)

T = TypeVar("T")


def speech_charge(voice: Voice, text: str) -> Charge:
    """What speaking `text` costs, however it is delivered: one unit per character."""
    return Charge(UsageEndpoint.TEXT_TO_SPEECH, len(text), voice.id)


async def synthesize_speech(
    runtime: Runtime,
    principal: Principal,
    ledger: Ledger,
    body: SpeechRequest,
    fmt: AudioFormat = MP3,
) -> bytes:
    """The native /text-to-speech: one file, billed once it is made."""
    manner = await manner_of(runtime, principal, body)
    voice, script, charge = await _held_voice(
        runtime, principal, ledger, body.voice_id, body.text, manner.language
    )
    audio = await speak(runtime, voice, script, ledger, fmt, manner=manner)
    await ledger.bill(charge)
    return audio


async def manner_of(runtime: Runtime, principal: Principal, body: SpeechRequest) -> Manner:
    """How the request's text is said: at its speed, going on from and into its
    neighbours' text (that of the requests it names, else the text it sends), with the rules
    of the dictionaries it names (the organization's defaults where it names none)."""
    previous, following = await stitched(
        runtime, principal.org_id, body.previous_request_ids, body.next_request_ids
    )
    context = context_of(
        body.previous_text if previous is None else previous,
        body.text,
        body.next_text if following is None else following,
    )
    manner = Manner(body.speed, context, language=body.language_code)
    return await with_dictionaries(runtime, principal.org_id, body.locators, manner)


async def _held_voice(
    runtime: Runtime,
    principal: Principal,
    ledger: Ledger,
    voice_id: str,
    text: str,
    language: str | None,
) -> tuple[Voice, Script, Charge]:
    """The caller's voice, checked to speak `language` (None: its own), the script of
    `text` (SSML's, or the text as it is) and what speaking it costs (its text without
    tags), the units held against the caller's caps before any work."""
    voice = await find_voice(runtime, principal, voice_id)
    check_language(runtime, voice, language)
    script = _script_of(runtime, voice, text, language or voice.language)
    charge = speech_charge(voice, script.written)
    await ledger.hold(charge.units)
    remember(runtime, ledger, principal.org_id, script.written)
    return voice, script, charge


def check_language(runtime: Runtime, voice: Voice, language: str | None) -> None:
    """Refuses a `language` (a request's `language_code`) the voice does not speak: a clone
    made here speaks its base voice's languages, any other voice its own."""
    if language is None:
        return
    spoken = clone_languages(runtime.engines, voice)
    if spoken is None:
        spoken = [voice.language.split("-")[0].lower()] if voice.language else []
    if language in spoken:
        return
    if not spoken:
        raise InvalidRequest(
            f"language_code: voice {voice.id!r} says each text in the language it is "
            "written in; send no language_code."
        )
    raise InvalidRequest(
        f"language_code {language!r}: voice {voice.id!r} speaks {', '.join(spoken)}."
    )


def _script_of(runtime: Runtime, voice: Voice, text: str, language: str | None) -> Script:
    if not is_ssml(text):
        return Script.plain(text)
    if is_remote(runtime, voice):
        raise InvalidRequest(f"Voice {voice.id!r} is spoken by a provider: send it plain text.")
    try:
        script = ssml.parse(text, language)
    except InvalidSsml as error:
        raise InvalidRequest(f"text (SSML): {error}.") from None
    if not script.written.strip():
        raise InvalidRequest("text (SSML): the document says nothing.")
    return script


@dataclass(frozen=True, slots=True)
class SpeechStream:
    chunks: AsyncGenerator[bytes, None]  # its first chunk made: errors before it are raised
    charge: Charge  # billed once every chunk went out


async def stream_speech(
    runtime: Runtime,
    principal: Principal,
    ledger: Ledger,
    voice_id: str,
    text: str,
    fmt: AudioFormat,
    *,
    manner: Manner = PLAIN,
) -> SpeechStream:
    """A streamed answer of `voice_id` saying `text`, its units held first."""
    voice, script, charge = await _held_voice(
        runtime, principal, ledger, voice_id, text, manner.language
    )
    chunks = speech_chunks(runtime, voice, script, ledger, fmt, streaming=True, manner=manner)
    return SpeechStream(await started(chunks), charge)


async def synthesize_with_timestamps(
    runtime: Runtime,
    principal: Principal,
    ledger: Ledger,
    body: SpeechRequest,
    fmt: AudioFormat,
) -> tuple[bytes, Alignment]:
    """/text-to-speech/with-timestamps: one file and when each character is spoken."""
    manner = await manner_of(runtime, principal, body)
    voice, script, charge = await _held_voice(
        runtime, principal, ledger, body.voice_id, body.text, manner.language
    )
    parts: list[bytes] = []
    alignment = Alignment()
    made = timed_speech(runtime, voice, script, ledger, fmt, streaming=False, manner=manner)
    async with aclosing(made) as chunks:
        async for chunk in chunks:
            parts.append(chunk.audio)
            alignment += chunk.alignment
    await ledger.bill(charge)
    return b"".join(parts), alignment


async def stream_with_timestamps(
    runtime: Runtime,
    principal: Principal,
    ledger: Ledger,
    body: SpeechRequest,
    fmt: AudioFormat,
) -> SpeechStream:
    """/text-to-speech/with-timestamps/stream: a JSON line per chunk, its audio and the
    characters it speaks."""
    manner = await manner_of(runtime, principal, body)
    voice, script, charge = await _held_voice(
        runtime, principal, ledger, body.voice_id, body.text, manner.language
    )
    made = timed_speech(runtime, voice, script, ledger, fmt, streaming=True, manner=manner)
    return SpeechStream(await started(_json_lines(made)), charge)


async def _json_lines(chunks: AsyncGenerator[TimedAudio, None]) -> AsyncGenerator[bytes, None]:
    async with aclosing(chunks):
        async for chunk in chunks:
            if chunk.audio or chunk.alignment.characters:
                yield timestamped_json(chunk.audio, chunk.alignment).encode() + b"\n"


def timestamped_json(audio: bytes, alignment: Alignment) -> str:
    """ElevenLabs' body of a timed answer (one line of its stream)."""
    body = {"audio_base64": base64.b64encode(audio).decode(), "alignment": alignment.as_json()}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


async def speak(
    runtime: Runtime,
    voice: Voice,
    text: str | Script,
    ledger: Ledger,
    fmt: AudioFormat = MP3,
    *,
    manner: Manner = PLAIN,
) -> bytes:
    """One file of `voice` saying `text` (or an SSML script); not billed (the caller
    bills)."""
    chunks = speech_chunks(runtime, voice, text, ledger, fmt, streaming=False, manner=manner)
    return b"".join([chunk async for chunk in chunks])


async def speech_chunks(
    runtime: Runtime,
    voice: Voice,
    text: str | Script,
    ledger: Ledger,
    fmt: AudioFormat,
    *,
    streaming: bool,
    manner: Manner = PLAIN,
) -> AsyncGenerator[bytes, None]:
    """`voice` saying `text` (or an SSML script) in `fmt` and in `manner`, encoded bytes as
    each chunk of text is spoken (or the whole file at the end when not `streaming`). A
    provider's voice (a clone made there too) is spoken by the provider, its bytes passed
    on as they arrive, at the speed asked but without the context, and with only the
    lexicon's aliases (SSML is refused before: `_script_of`)."""
    script = _scripted(text)
    remote = remote_speaker(runtime, voice)
    if remote is not None:
        said = manner.lexicon.aliased(script.written)
        # The provider's own timeout, plus the inference budget's share for the longest
        # the text could take to say.
        seconds = remote.provider.config.timeout_seconds
        seconds += runtime.inference_budget.per_audio_second * len(said) / SLOWEST_SPEECH
        made_there = remote.provider.speak(
            remote.voice,
            said,
            fmt,
            speed=manner.speed,
            bitrate=runtime.settings.mp3_bitrate,
            streaming=streaming,
            deadline=time.monotonic() + seconds,
        )
        async with aclosing(made_there) as chunks:
            async for chunk in chunks:
                if chunk:
                    yield chunk
        return
    encoder = AudioEncoder(fmt, streaming=streaming, bitrate=runtime.settings.mp3_bitrate)
    speech = _Encoded(runtime, ledger, voice, script, encoder, manner)
    async with aclosing(_made_here(runtime, voice, ledger, speech)) as made:
        async for chunk in made:
            if chunk:
                yield chunk


@dataclass(frozen=True, slots=True)
class TimedAudio:
    audio: bytes  # the encoder's bytes so far (b"" until the end for a whole file)
    alignment: Alignment  # the characters spoken in this chunk (times from the audio's start)
    seconds: float  # the chunk's length


async def timed_speech(
    runtime: Runtime,
    voice: Voice,
    text: str | Script,
    ledger: Ledger,
    fmt: AudioFormat,
    *,
    streaming: bool,
    encoder: AudioEncoder | None = None,
    manner: Manner = PLAIN,
) -> AsyncGenerator[TimedAudio, None]:
    """`voice` saying `text` (or an SSML script: its text as written is timed) in `fmt` and
    in `manner`, with when each character is spoken,
    chunk by chunk. A provider's voice comes whole, its times as the provider reports them
    (a provider whose API reports none, or takes no speed or dictionary, is refused). With
    the caller's `encoder` (a stream of several texts, this node's voices only) the encoder
    is not finished."""
    script = _scripted(text)
    remote = remote_speaker(runtime, voice)
    if remote is not None:
        if not remote.provider.reports_timestamps:
            raise InvalidRequest(
                f"Voice {voice.id!r} is spoken by a provider whose API reports no timestamps."
            )
        if manner.speed != 1.0:
            raise InvalidRequest(
                f"Voice {voice.id!r} is spoken by a provider whose timed speech takes no speed."
            )
        if len(manner.lexicon) and not manner.lexicon_by_default:
            raise InvalidRequest(
                f"Voice {voice.id!r} is spoken by a provider whose timed speech takes no "
                "pronunciation dictionaries."
            )
        assert encoder is None, "a provider's voice is not spoken into a caller's encoder"
        audio, alignment = await remote.provider.speak_timed(remote.voice, script.written, fmt)
        yield TimedAudio(audio, alignment, max(alignment.ends, default=0.0))
        return
    finishing = encoder is None
    if encoder is None:
        encoder = AudioEncoder(fmt, streaming=streaming, bitrate=runtime.settings.mp3_bitrate)
    speech = _Timed(runtime, ledger, voice, script, encoder, manner, finishing=finishing)
    async with aclosing(_made_here(runtime, voice, ledger, speech)) as made:
        async for chunk in made:
            yield chunk


def _scripted(text: str | Script) -> Script:
    return text if isinstance(text, Script) else Script.plain(text)


def remote_speaker(runtime: Runtime, voice: Voice) -> ProviderVoice | None:
    """The provider that speaks the voice (a clone made there too), if one does."""
    return resolver.remote_speaker(runtime.providers, voice.engine_voice, voice.profile)


def is_remote(runtime: Runtime, voice: Voice) -> bool:
    """A provider speaks the voice."""
    return remote_speaker(runtime, voice) is not None


async def _made_here(
    runtime: Runtime, voice: Voice, ledger: Ledger, speech: _Speech[T]
) -> AsyncGenerator[T, None]:
    """What `speech` makes of this node's engines speaking, its chunks pool steps. Engine
    failures are API errors here; a client that leaves stops the speech at the next chunk
    (`ClientClosedRequest`)."""
    engine = Engines.speaker_name(voice.engine_voice, voice.profile)
    made = runtime.pool.in_order(
        Job(Capability.TEXT_TO_SPEECH, engine, abandoned=ledger.client_gone),
        speech.parts,
        speech.emit,
        speech.finish,
    )
    try:
        async with aclosing(made) as items:
            async for item in items:
                yield item
    except UnknownVoice as exc:
        logger.error("voice %s of %s: %s", voice.id, ledger.request_id, exc)
        raise NotFound(f"Voice {voice.id!r} is not served by this node.") from None
    except EngineError as exc:
        logger.error("synthesis failed for %s with voice %s: %r", ledger.request_id, voice.id, exc)
        raise ProviderError() from exc


class _Speech(ABC, Generic[T]):
    """One request's speech in the pool: its chunks, spoken on any worker (`parts`), then
    in order checked against the request's budget, counted and encoded (`emit`)."""

    def __init__(
        self,
        runtime: Runtime,
        ledger: Ledger,
        voice: Voice,
        script: Script,
        encoder: AudioEncoder,
        manner: Manner,
    ) -> None:
        assert runtime.engines is not None
        self.encoder = encoder
        self._budget = runtime.inference_budget
        self._request_id = ledger.request_id
        self._metrics = runtime.metrics
        self._deadline: Deadline | None = None  # from when the first chunk starts
        self._spoken = 0.0
        self._chunks = 0
        # A stream starts with a short chunk, so its first audio comes at once; a whole
        # file keeps every sentence in one piece (the best prosody).
        parts = runtime.engines.script_parts(
            voice.engine_voice,
            voice.profile,
            script,
            quick_start=encoder.streaming,
            manner=manner,
        )
        self.parts = [functools.partial(self._made, part) for part in parts]

    def _made(self, part: Callable[[], SpokenChunk]) -> SpokenChunk:
        if self._deadline is None:
            self._deadline = self._budget.start()
        return part()

    def _checked(self, chunk: SpokenChunk) -> None:
        """Counted, and checked against the budget after each chunk, so a stream whose
        client reads too slowly stops too."""
        seconds = chunk.pcm.duration_seconds
        self._chunks += 1
        logger.debug("%s spoke chunk %d", self._request_id, self._chunks)
        self._spoken += seconds
        self._metrics.count_audio(Capability.TEXT_TO_SPEECH, seconds)
        assert self._deadline is not None
        self._deadline.check(self._spoken)

    @abstractmethod
    def emit(self, chunk: SpokenChunk) -> T: ...

    @abstractmethod
    def finish(self) -> T: ...


class _Encoded(_Speech[bytes]):
    """Every chunk is an item of its own, bytes or not (a whole file's encoder keeps them
    to the end): between items the pool gives workers to others and stops the speech of
    a client that left."""

    def emit(self, chunk: SpokenChunk) -> bytes:
        self._checked(chunk)
        return self.encoder.add(chunk.pcm)

    def finish(self) -> bytes:
        return self.encoder.finish()


class _Timed(_Speech[TimedAudio]):
    """Each chunk's audio with the characters it speaks; the encoder finished at the end
    only when `finishing` (not for one text of several in a stream)."""

    def __init__(
        self,
        runtime: Runtime,
        ledger: Ledger,
        voice: Voice,
        script: Script,
        encoder: AudioEncoder,
        manner: Manner,
        *,
        finishing: bool,
    ) -> None:
        super().__init__(runtime, ledger, voice, script, encoder, manner)
        self._timer = TextTimer(script.written)
        self._finishing = finishing

    def emit(self, chunk: SpokenChunk) -> TimedAudio:
        self._checked(chunk)
        timed = self._timer.chunk(chunk.text, chunk.pcm)
        return TimedAudio(self.encoder.add(chunk.pcm), timed, chunk.pcm.duration_seconds)

    def finish(self) -> TimedAudio:
        audio = self.encoder.finish() if self._finishing else b""
        return TimedAudio(audio, self._timer.rest(), 0.0)


async def started(chunks: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    """`chunks`, once its first item exists: an error in making it is raised here, before
    any status is sent, and gets its ordinary error response."""
    try:
        first = await anext(chunks)
    except StopAsyncIteration:
        first = b""
    except BaseException:
        await chunks.aclose()
        raise
    return _prepend(first, chunks)


async def _prepend(first: bytes, rest: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    try:
        if first:
            yield first
        async for chunk in rest:
            yield chunk
    finally:
        await rest.aclose()
