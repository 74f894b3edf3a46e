"""Speech to text over Wyoming: `transcribe` (its language hint, and the names and terms
that bias it), then `audio-start`, `audio-chunk`s and `audio-stop`; the answer is the
streamed transcript events (`transcript-start`, a `transcript-chunk` per segment) around
the `transcript` itself.

Audio comes at any usual rate, 8, 16 or 32-bit, mono or stereo, and is turned into 16 kHz
as it arrives (`audio.raw_pcm`), so the node holds only what Whisper will hear. It goes to
the same engine or provider as the HTTP API's, through the same admission. A stream that
runs past `VOICE_SERVICE_WYOMING_MAX_AUDIO_SECONDS` is refused and not billed; a request
is billed its seconds of audio, rounded up, once its transcript went out.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from wyoming.asr import Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.event import Event

from voice_service.audio.raw_pcm import PcmFormat, RawPcmIn
from voice_service.audio.vad import Floats
from voice_service.books.ledger import Ledger
from voice_service.books.unit_gate import UnitGate
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import InvalidRequest, PayloadTooLarge
from voice_service.core.vocabulary import Scope, Service, UsageEndpoint
from voice_service.engines.protocols import TranscribeOptions
from voice_service.transcription.service import (
    HeardText,
    billed_seconds,
    known_languages,
    offered_models,
    parse_language,
    parse_model,
    require_transcriber,
    transcribe_samples,
)
from voice_service.web.context import AppContext
from voice_service.wyoming.connection import Connection
from voice_service.wyoming.requests import admitted

TRANSCRIPTION = (Scope.SPEECH_TO_TEXT, Service.SPEECH_TO_TEXT)
Pcm16 = npt.NDArray[np.int16]
# Seconds of audio a capped key's transcription holds ahead of what it has sent.
HOLD_AHEAD = 60
MAX_PROMPT_CHARACTERS = 500  # names and terms past it are left out of Whisper's prompt


def audio_format(event: Event) -> PcmFormat:
    """The format an `audio-start` or `audio-chunk` declares; a 400 if it is not taken."""
    values = [event.data.get(name) for name in ("rate", "width", "channels")]
    whole = [value for value in values if isinstance(value, int) and not isinstance(value, bool)]
    if len(whole) != len(values):
        raise InvalidRequest(f"An {event.type} event needs whole rate, width and channels.")
    fmt = PcmFormat(*whole)
    problem = fmt.problem()
    if problem is not None:
        raise InvalidRequest(f"Audio of {problem} is not taken.")
    return fmt


class Transcription:
    """One transcription request, from `transcribe` (or a bare `audio-start`) to its
    transcript."""

    def __init__(
        self,
        context: AppContext,
        connection: Connection,
        ledger: Ledger,
        options: TranscribeOptions,
    ) -> None:
        self._context = context
        self._connection = connection
        self.ledger = ledger
        self._options = options
        self._gate = UnitGate(ledger, HOLD_AHEAD)
        self._audio: RawPcmIn | None = None
        self._heard: list[Pcm16] = []  # held as 16-bit: half the memory of floats
        self._max_seconds = context.settings.wyoming_max_audio_seconds

    @staticmethod
    async def start(
        context: AppContext, connection: Connection, ledger: Ledger, key_id: str, event: Event
    ) -> Transcription:
        """Admit the request `event` opens (a `transcribe`, or an `audio-start` without)."""
        await admitted(context, ledger, key_id, TRANSCRIPTION)
        require_transcriber(context)
        options = (
            _options(context, event.data) if event.type == "transcribe" else TranscribeOptions()
        )
        ledger.stream_starting()
        return Transcription(context, connection, ledger, options)

    @property
    def listening(self) -> bool:
        """Audio has started."""
        return self._audio is not None

    def begin_audio(self, event: Event) -> None:
        if self._audio is not None:
            raise InvalidRequest("A second audio-start before the first audio-stop.")
        self._audio = RawPcmIn(audio_format(event))

    async def add(self, event: Event) -> None:
        """An `audio-chunk`: taken, or refused (another format than its start's, past the
        longest audio taken, past a monthly cap)."""
        if self._audio is None:
            raise InvalidRequest("An audio-chunk before audio-start.")
        if audio_format(event) != self._audio.format:
            raise InvalidRequest("An audio-chunk in another format than its audio-start's.")
        data = event.payload or b""
        seconds = self._audio.seconds_with(data)
        if seconds > self._max_seconds:
            raise PayloadTooLarge(
                f"The audio runs past {self._max_seconds:g} s, the longest a Wyoming "
                "transcription takes (VOICE_SERVICE_WYOMING_MAX_AUDIO_SECONDS)."
            )
        await self._gate(math.ceil(seconds))
        self._heard.append(_pcm16(self._audio.add(data)))

    async def finish(self) -> None:
        """`audio-stop`: the transcript, then the bill."""
        if self._audio is None:
            raise InvalidRequest("An audio-stop before audio-start.")
        self._heard.append(_pcm16(self._audio.finish()))
        samples = np.concatenate(self._heard).astype(np.float32) / 32768.0
        self._heard = []
        if samples.size == 0:  # nothing was said (a client's VAD heard no speech)
            heard = HeardText("", self._options.language, ())
        else:
            heard = await transcribe_samples(
                self._context, samples, self._options, self.ledger, live=True
            )
        language = heard.language or self._options.language
        await self._connection.send(TranscriptStart(language=language))
        for text in heard.segments:
            await self._connection.send(TranscriptChunk(text=text))
        await self._connection.send(Transcript(text=heard.text, language=language))
        await self._connection.send(TranscriptStop())
        await self.ledger.stream_ended(self.charge, None, self._connection.bytes_sent)

    @property
    def charge(self) -> Charge:
        """The seconds of audio received, rounded up, as the HTTP API bills them."""
        seconds = self._audio.seconds_received if self._audio is not None else Fraction(0)
        units = billed_seconds(seconds) if seconds else 0  # no audio, no bill
        return Charge(UsageEndpoint.SPEECH_TO_TEXT, units)


def _options(context: AppContext, data: dict[str, object]) -> TranscribeOptions:
    language = data.get("language")
    if language is not None and not isinstance(language, str):
        raise InvalidRequest('"language" is a language code.')
    if language == "auto":  # as wyoming-faster-whisper takes it: detect
        language = None
    # Home Assistant names a language with its region ("en-US"); the model knows "en".
    code = parse_language(
        language.replace("_", "-").split("-")[0] if language else None, known_languages(context)
    )
    bias = []
    for field in ("transcript_names", "transcript_terms"):
        words = data.get(field)
        if isinstance(words, list):
            bias += [word.strip() for word in words if isinstance(word, str) and word.strip()]
    prompt = ", ".join(bias)[:MAX_PROMPT_CHARACTERS] or None
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidRequest('"name" is a model\'s name.')
    # "whisper" and "provider" are what describe named the one model before there were more.
    model = parse_model(name, offered_models(context), '"name"', ("whisper", "provider"))
    return TranscribeOptions(language=code, prompt=prompt, model=model)


def _pcm16(samples: Floats) -> Pcm16:
    return np.round(np.clip(samples, -1.0, 32767 / 32768) * 32768.0).astype(np.int16)
