"""Text to speech over Wyoming: `synthesize`, and text streamed in as Home Assistant sends a
language model's reply while it is written (`synthesize-start`, `synthesize-chunk`s,
`synthesize-stop`).

Audio goes out as raw 16-bit mono PCM at the voice's own rate (`audio-start`,
`audio-chunk`s, `audio-stop`), chunk by chunk as the engine speaks. Streamed text is spoken
clause by clause as each clause's end arrives (`speech.clauses`), in one audio stream,
followed by `synthesize-stopped`. Wyoming names no dictionaries, so speech is said with
the organization's default dictionaries. A request is billed its characters, as the HTTP
API bills them, once all of its audio went out; one that failed, or whose client left, is
billed the characters whose audio went out, as a WebSocket session is, and its row says why
it ended. A key revoked (or its organization suspended) while it speaks ends it within a
second, as it ends a WebSocket session (`web.key_watch`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import aclosing

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.tts import Synthesize, SynthesizeStart, SynthesizeStopped, SynthesizeVoice

from voice_service.audio.encode import AudioEncoder, AudioFormat
from voice_service.audio.output_formats import NAMED_FORMATS
from voice_service.books.ledger import Ledger, failure_answer
from voice_service.books.unit_gate import UnitGate
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import ApiError, InvalidRequest
from voice_service.core.ids import catalogue_voice_id
from voice_service.core.models import Voice
from voice_service.core.vocabulary import Scope, Service, UsageEndpoint
from voice_service.engines.catalog import CLONE_BASE_VOICE
from voice_service.engines.manner import Manner
from voice_service.pronunciation.service import with_dictionaries
from voice_service.speech.clauses import next_clause
from voice_service.speech.schemas import MAX_TEXT_LENGTH
from voice_service.speech.service import is_remote, speech_charge, speech_chunks, timed_speech
from voice_service.tenancy.principal import Principal
from voice_service.voices.service import find_voice
from voice_service.web.context import AppContext
from voice_service.web.key_watch import key_watched
from voice_service.wyoming.connection import Connection
from voice_service.wyoming.describe import usable_voices
from voice_service.wyoming.requests import admitted

SPEECH = (Scope.TEXT_TO_SPEECH, Service.TEXT_TO_SPEECH)
# Raw 16-bit mono at the voice's own rate; a provider's voice at the rate providers send.
PCM = AudioFormat("s16le", "pcm_s16le", "audio/pcm")
PROVIDER_PCM = NAMED_FORMATS["pcm_24000"]
WIDTH = 2
# Characters a capped key's streamed synthesis holds ahead of the text it has sent.
HOLD_AHEAD = 1000


def parsed_text(event: Event) -> str:
    text = event.data.get("text")
    if not isinstance(text, str):
        raise InvalidRequest(f'A {event.type} event needs its "text".')
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("The text holds a lone surrogate.") from None
    return text


def parsed_voice(event: Event) -> SynthesizeVoice | None:
    voice = event.data.get("voice")
    if voice is None:
        return None
    if not isinstance(voice, dict) or not all(
        isinstance(voice.get(field), str | None) for field in ("name", "language")
    ):
        raise InvalidRequest('"voice" is an object with a "name" or a "language".')
    return SynthesizeVoice.from_dict(voice)


async def chosen_voice(
    context: AppContext, principal: Principal, wanted: SynthesizeVoice | None
) -> Voice:
    """The voice named (its id), else the first that speaks the language asked for (the
    catalogue's order, then the organization's clones), else the English voice every
    install has."""
    if wanted is not None and wanted.name:
        return await find_voice(context, principal, wanted.name)
    if wanted is None or not wanted.language:
        return await find_voice(context, principal, catalogue_voice_id(CLONE_BASE_VOICE))
    voices = await usable_voices(context, principal)
    asked = _tag(wanted.language)
    for exactly in (True, False):  # "en-GB" takes an English voice when none is British
        for voice in voices:
            if voice.language and _speaks(_tag(voice.language), asked, exactly=exactly):
                return voice
    raise InvalidRequest(f"No voice speaks {wanted.language!r}.")


def _tag(language: str) -> str:
    """A language tag as BCP 47 writes it, in lower case ("en_US" → "en-us")."""
    return language.replace("_", "-").lower()


def _speaks(voice_tag: str, asked: str, *, exactly: bool) -> bool:
    if exactly:
        return voice_tag == asked
    return voice_tag.split("-")[0] == asked.split("-")[0]


async def default_manner(context: AppContext, principal: Principal) -> Manner:
    """Wyoming's requests are said with the organization's default dictionaries."""
    return await with_dictionaries(context, principal.org_id, None)


async def spoken_pcm(
    context: AppContext, voice: Voice, text: str, ledger: Ledger, manner: Manner
) -> AsyncIterator[tuple[int, bytes, int]]:
    """(rate, raw PCM, the characters it says) as the voice says `text`, chunk by chunk. A
    provider's voice says when each character is spoken only for the whole text: its
    characters come with an empty last chunk, after all of its audio."""
    if is_remote(context, voice):
        rate = PROVIDER_PCM.sample_rate
        assert rate is not None
        made = speech_chunks(
            context, voice, text, ledger, PROVIDER_PCM, streaming=True, manner=manner
        )
        async with aclosing(made) as pieces:
            async for piece in pieces:
                yield rate, piece, 0
        yield rate, b"", len(text)
        return
    encoder = AudioEncoder(PCM, streaming=True)
    timed = timed_speech(
        context, voice, text, ledger, PCM, streaming=True, encoder=encoder, manner=manner
    )
    unsaid = 0  # characters whose audio the encoder still holds
    async with aclosing(timed) as chunks:
        async for chunk in chunks:
            unsaid += len(chunk.alignment.characters)
            if chunk.audio:
                assert encoder.sample_rate is not None
                yield encoder.sample_rate, chunk.audio, unsaid
                unsaid = 0


class AudioOut:
    """One answer's audio: `audio-start` before its first chunk, `audio-stop` at its end;
    `characters`: those whose audio has gone out, which an answer cut short is billed."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._rate: int | None = None
        self.characters = 0

    async def send(self, rate: int, pcm: bytes, characters: int) -> None:
        if pcm:
            if self._rate is None:
                self._rate = rate
                await self._connection.send(AudioStart(rate=rate, width=WIDTH, channels=1))
            chunk = AudioChunk(rate=rate, width=WIDTH, channels=1, audio=pcm)
            await self._connection.send(chunk)
        self.characters += characters

    async def end(self) -> None:
        if self._rate is None:  # nothing was said: still a whole (empty) answer
            self._rate = 22_050
            await self._connection.send(AudioStart(rate=self._rate, width=WIDTH, channels=1))
        await self._connection.send(AudioStop())


async def synthesize(
    context: AppContext, connection: Connection, ledger: Ledger, key_id: str, event: Event
) -> None:
    """One `synthesize`: its audio, then its bill (the caller logs a refusal)."""
    request = Synthesize(text=parsed_text(event), voice=parsed_voice(event))
    principal = await admitted(context, ledger, key_id, SPEECH)
    if not request.text.strip():
        raise InvalidRequest("The text is empty.")
    if len(request.text) > MAX_TEXT_LENGTH:
        raise InvalidRequest(f"The text is longer than {MAX_TEXT_LENGTH} characters.")
    voice = await chosen_voice(context, principal, request.voice)
    manner = await default_manner(context, principal)
    charge = speech_charge(voice, request.text)
    await ledger.hold(charge.units)
    ledger.stream_starting()
    audio = AudioOut(connection)
    try:
        async with (
            key_watched(context, key_id, *SPEECH) as cut_off,
            aclosing(
                cut_off.guard(spoken_pcm(context, voice, request.text, ledger, manner))
            ) as spoken,
        ):
            async for rate, pcm, characters in spoken:
                await audio.send(rate, pcm, characters)
        await audio.end()
    except Exception as exc:
        await _failed(connection, ledger, _sent(voice, audio), exc)
        return
    await ledger.stream_ended(charge, None, connection.bytes_sent)


class StreamedSynthesis:
    """One `synthesize-start` … `synthesize-stop`: text taken as it comes, its clauses
    spoken in order by a task of their own while the connection reads on."""

    def __init__(
        self,
        context: AppContext,
        connection: Connection,
        ledger: Ledger,
        key_id: str,
        voice: Voice,
        manner: Manner,
    ) -> None:
        self._context = context
        self._key_id = key_id
        self._connection = connection
        self.ledger = ledger
        self._voice = voice
        self._manner = manner
        self._gate = UnitGate(ledger, HOLD_AHEAD)
        self._received = 0  # characters taken, which the answer bills
        self._pending = ""  # text whose clause has not ended
        self._clauses: asyncio.Queue[str | None] = asyncio.Queue()  # None: the end
        self._audio = AudioOut(connection)
        self.failure: ApiError | None = None
        self._settling = False  # the speaker is writing the request's row: let it finish
        self._speaker = asyncio.create_task(self._speak(), name="wyoming-synthesis")

    @staticmethod
    async def start(
        context: AppContext, connection: Connection, ledger: Ledger, key_id: str, event: Event
    ) -> StreamedSynthesis:
        wanted = SynthesizeStart(voice=parsed_voice(event)).voice
        principal = await admitted(context, ledger, key_id, SPEECH)
        voice = await chosen_voice(context, principal, wanted)
        manner = await default_manner(context, principal)
        ledger.stream_starting()
        return StreamedSynthesis(context, connection, ledger, key_id, voice, manner)

    async def add(self, text: str) -> None:
        """More text; raises `RateLimited` when a monthly cap would be passed, and
        `InvalidRequest` past the longest text a request may speak."""
        if self._received + len(text) > MAX_TEXT_LENGTH:
            raise InvalidRequest(
                f"The text streamed runs past {MAX_TEXT_LENGTH} characters, the most one "
                "request speaks."
            )
        await self._gate(self._received + len(text))
        self._received += len(text)
        self._pending += text
        spoken, self._pending = next_clause(self._pending, everything=False)
        if spoken.strip():
            self._clauses.put_nowait(spoken)

    async def stop(self) -> None:
        """No more text: the rest is spoken, then the answer ends and is billed."""
        if self._pending.strip():
            self._clauses.put_nowait(self._pending)
        self._pending = ""
        self._clauses.put_nowait(None)
        await asyncio.shield(self._speaker)

    async def abandon(self, error: ApiError) -> None:
        """The request ends unfinished (the client left, a cap, the node stopping): billed
        the characters whose audio went out."""
        if not self._settling:
            self._speaker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._speaker
        if not self.ledger.settled:
            sent = _sent(self._voice, self._audio)
            await self.ledger.stream_cut_short(sent, error, self._connection.bytes_sent)

    async def _speak(self) -> None:
        try:
            async with key_watched(self._context, self._key_id, *SPEECH) as cut_off:
                while (clause := await cut_off.race(self._clauses.get())) is not None:
                    made = spoken_pcm(self._context, self._voice, clause, self.ledger, self._manner)
                    async with aclosing(cut_off.guard(made)) as spoken:
                        async for rate, pcm, characters in spoken:
                            await self._audio.send(rate, pcm, characters)
            await self._audio.end()
            await self._connection.send(SynthesizeStopped())
        except Exception as exc:
            self._settling = True
            sent = _sent(self._voice, self._audio)
            self.failure = await _failed(self._connection, self.ledger, sent, exc)
            return
        self._settling = True
        # What the text taken costs: one unit per character, as `speech_charge`.
        charge = Charge(UsageEndpoint.TEXT_TO_SPEECH, self._received, self._voice.id)
        await self.ledger.stream_ended(charge, None, self._connection.bytes_sent)


def _sent(voice: Voice, audio: AudioOut) -> Charge:
    """What the audio that went out costs: its characters."""
    return Charge(UsageEndpoint.TEXT_TO_SPEECH, audio.characters, voice.id)


async def _failed(connection: Connection, ledger: Ledger, sent: Charge, exc: Exception) -> ApiError:
    """Speaking failed part-way: the error event, and a row saying why, billed the audio
    that went out."""
    error = failure_answer(ledger.request_id, exc)
    await connection.refuse(error)
    await ledger.stream_cut_short(sent, error, connection.bytes_sent)
    return error
