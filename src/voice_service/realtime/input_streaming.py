"""ElevenLabs' input-streaming protocol: text in as a language model writes it, speech out
as soon as a clause of it is complete.

The session's query may name ElevenLabs' `language_code` (a clone says the text in it, as on
the speech routes). The client opens with `{"text": " "}` (of ElevenLabs' `voice_settings`
its `speed` is used; the others and `generation_config` are accepted and not used), sends
text pieces (`{"text": "Hello, ", "try_trigger_generation": true}`), may `{"flush": true}`
to have what it sent spoken now, and ends with `{"text": ""}`.
Text is spoken clause by clause, in order, each clause as soon as its end has arrived (a
clause mark or sentence end followed by a space, or a line break); a run of 120 characters
without one is spoken up to its last space. Each chunk of speech comes as `{"audio": base64,
"isFinal": false, "alignment": ..., "normalizedAlignment": ...}` (ElevenLabs' `chars`,
`charStartTimesMs`, `charsDurationsMs`, from the start of the session's audio; null for a
provider's voice), and the end as `{"audio": null, "isFinal": true}`. The audio is one
stream in the session's `output_format`, encoded across clauses. The session bills the
characters whose audio it sent, whatever ended it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from voice_service.audio.encode import AudioEncoder, AudioFormat
from voice_service.audio.output_formats import parse_output_format
from voice_service.books.unit_gate import UnitGate
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import (
    ApiError,
    InternalError,
    InvalidRequest,
    RateLimited,
    session_message,
)
from voice_service.core.models import Voice
from voice_service.core.vocabulary import UsageEndpoint
from voice_service.engines.alignment import Alignment
from voice_service.engines.manner import SPEEDS, Manner
from voice_service.pronunciation.schemas import LocatorIn, locators_of
from voice_service.pronunciation.service import MAX_LOCATORS, with_dictionaries
from voice_service.realtime.upgrade import (
    FINISH_SHARE,
    Ending,
    Session,
    next_message,
)
from voice_service.speech.clauses import next_clause
from voice_service.speech.schemas import LANGUAGE_CODE_PATTERN, VoiceSettings
from voice_service.speech.service import check_language, is_remote, speech_chunks, timed_speech
from voice_service.tenancy.principal import Principal
from voice_service.voices.service import find_voice
from voice_service.web.context import AppContext

logger = logging.getLogger(__name__)

# Characters a capped key's session holds ahead of what it has sent.
HOLD_AHEAD = 1000
# The opening message's `pronunciation_dictionary_locators`, as a speech request takes them.
_LOCATORS = TypeAdapter(Annotated[list[LocatorIn] | None, Field(max_length=MAX_LOCATORS)])


@dataclass(frozen=True, slots=True)
class Prepared:
    voice: Voice
    fmt: AudioFormat
    language: str | None  # what a clone speaks in (None: its base's own)


def preparer(
    voice_id: str, output_format: str | None, language_code: str | None
) -> Callable[[AppContext, Principal], Awaitable[Prepared]]:
    """The upgrade's own checks: the format's name, the caller's voice and the language it
    is asked to speak (400, 404)."""

    async def prepare(context: AppContext, principal: Principal) -> Prepared:
        fmt = parse_output_format(output_format)
        if language_code is not None and not re.fullmatch(LANGUAGE_CODE_PATTERN, language_code):
            raise InvalidRequest('language_code: two lowercase letters (ISO 639-1, e.g. "es").')
        voice = await find_voice(context, principal, voice_id)
        check_language(context, voice, language_code)
        return Prepared(voice, fmt, language_code)

    return prepare


class InputStream:
    """One session: text messages in, audio messages out, one clause at a time."""

    def __init__(self, session: Session, prepared: Prepared) -> None:
        self._session = session
        self._voice = prepared.voice
        self._fmt = prepared.fmt
        self._timed = not is_remote(session.context, prepared.voice)  # engines here time words
        settings = session.context.settings
        self._encoder = AudioEncoder(prepared.fmt, streaming=True, bitrate=settings.mp3_bitrate)
        self._gate = UnitGate(session.ledger, HOLD_AHEAD)
        self._opened = False
        # The query's language, then the opening message's voice_settings.speed and
        # pronunciation dictionaries.
        self._manner = Manner(language=prepared.language)
        self._received = 0  # characters of text after the opening message (held under a cap)
        # Billed: the characters whose audio was sent (by the alignment sent with it; a
        # provider's voice, which has none, by whole clauses).
        self.delivered = 0
        self._pending = ""  # text whose clause has not ended yet
        self._clauses: asyncio.Queue[str | None] = asyncio.Queue()  # None: the end
        self._speaking = False
        self._elapsed = 0.0  # seconds of audio made so far
        self._unsent = Alignment()  # characters whose audio the encoder still holds
        self.ended = asyncio.Event()  # the last audio went out, or speaking failed
        self.failure: ApiError | None = None
        self._speaker = asyncio.create_task(self._speak_clauses())

    @property
    def busy(self) -> bool:
        """Text is waiting to be spoken, or being spoken."""
        return self._speaking or not self._clauses.empty()

    async def handle(self, raw: str | bytes) -> bool:
        """Take one client message; False once the client has ended its text. A monthly
        cap that the text would pass raises `RateLimited` (the text is not taken)."""
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            message = None
        text = message.get("text") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(text, str):
            await self._error("invalid_message", 'Each message is a JSON object with a "text".')
            return True
        if not _is_unicode(text):
            await self._error("invalid_message", "The text holds a lone surrogate: not taken.")
            return True
        if not self._opened:
            self._opened = True  # ElevenLabs' opening message: its " " is not text to speak
            await self._take_settings(message.get("voice_settings"))
            await self._take_locators(message.get("pronunciation_dictionary_locators"))
            if not text.strip():
                return True
        if text == "":
            self.end()
            return False
        await self._gate(self._received + len(text))
        self._received += len(text)
        self._session.activity.touch()
        self._pending += text
        spoken, self._pending = next_clause(self._pending, everything=message.get("flush") is True)
        self._queue(spoken)
        return True

    async def _take_settings(self, settings: object) -> None:
        """The opening message's `voice_settings`: a speed the voices do not take gets an
        error message and leaves the session at the voice's pace."""
        if not isinstance(settings, dict) or "speed" not in settings:
            return
        try:
            speed = VoiceSettings(speed=settings["speed"]).speed
            self._manner = dataclasses.replace(self._manner, speed=speed)
        except ValidationError:
            await self._error(
                "invalid_message",
                f"voice_settings.speed must be a number from {SPEEDS[0]} to {SPEEDS[1]}; "
                "the session speaks at the voice's pace.",
            )

    async def _take_locators(self, items: object) -> None:
        """The opening message's `pronunciation_dictionary_locators` (the organization's
        defaults where it has none): dictionaries that are not the organization's, or too
        many, get an error message and the session speaks without them."""
        try:
            locators = locators_of(_LOCATORS.validate_python(items))
            manner = await with_dictionaries(
                self._session.context, self._session.principal.org_id, locators, self._manner
            )
        except ValidationError:
            await self._error(
                "invalid_message",
                "pronunciation_dictionary_locators must be a list of at most "
                f"{MAX_LOCATORS} objects with a pronunciation_dictionary_id; the session "
                "speaks without dictionaries.",
            )
        except ApiError as error:
            await self._error(
                "invalid_message", f"{error.message} The session speaks without dictionaries."
            )
        else:
            self._manner = manner

    def end(self) -> None:
        """No more text: what is pending is spoken, then the last message goes out."""
        self._queue(self._pending)
        self._pending = ""
        self._clauses.put_nowait(None)

    async def close(self) -> None:
        """Stop speaking (a client that left, a session that ended)."""
        self._speaker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._speaker

    def _queue(self, text: str) -> None:
        if text.strip():
            self._clauses.put_nowait(text)

    async def _speak_clauses(self) -> None:
        try:
            while (clause := await self._clauses.get()) is not None:
                self._speaking = True
                async for audio, alignment in self._spoken(clause):
                    await self._send_audio(audio, alignment)
                if not self._timed:  # a provider's voice: its clause's audio is all out
                    self.delivered += len(clause)
                self._speaking = False
            if self._timed and self._elapsed > 0:
                await self._send_audio(self._encoder.finish(), None)
            await self._session.channel.send({"audio": None, "isFinal": True})
        except Exception as exc:
            if not isinstance(exc, ApiError):
                logger.exception("speaking for session %s failed", self._session.ledger.request_id)
            error = exc if isinstance(exc, ApiError) else InternalError()
            self.failure = error
            await self._error(
                error.code.lower(),
                f"{session_message(error)} Only the characters whose audio was sent are "
                f"billed: {self.delivered}.",
            )
        finally:
            self._speaking = False
            self.ended.set()

    async def _spoken(self, clause: str) -> AsyncIterator[tuple[bytes, Alignment | None]]:
        """The clause's audio and alignment (times from the session's start), chunk by
        chunk; a provider's voice has no alignment."""
        context, ledger = self._session.context, self._session.ledger
        if not self._timed:
            made = speech_chunks(
                context, self._voice, clause, ledger, self._fmt, streaming=True, manner=self._manner
            )
            async with aclosing(made) as audio:
                async for piece in audio:
                    yield piece, None
            return
        timed = timed_speech(
            context,
            self._voice,
            clause,
            ledger,
            self._fmt,
            streaming=True,
            encoder=self._encoder,
            manner=self._manner,
        )
        start = self._elapsed  # the clause's times count from its own start
        async with aclosing(timed) as chunks:
            async for chunk in chunks:
                self._elapsed += chunk.seconds
                yield chunk.audio, _shifted(chunk.alignment, start)

    async def _send_audio(self, audio: bytes, alignment: Alignment | None) -> None:
        if alignment is not None:
            self._unsent += alignment
        if not audio:  # the encoder holds these bytes back: their characters wait with them
            return
        timing = _elevenlabs_alignment(self._unsent) if self._timed else None
        characters = len(self._unsent.characters)
        self._unsent = Alignment()
        await self._session.channel.send(
            {
                "audio": base64.b64encode(audio).decode(),
                "isFinal": False,
                "alignment": timing,
                "normalizedAlignment": timing,
            }
        )
        self.delivered += characters  # a voice of this node's: the characters this audio says

    async def _error(self, code: str, message: str) -> None:
        await self._session.channel.send({"error": code, "message": message})


def _shifted(alignment: Alignment, seconds: float) -> Alignment:
    return Alignment(
        alignment.characters,
        tuple(start + seconds for start in alignment.starts),
        tuple(end + seconds for end in alignment.ends),
    )


def _elevenlabs_alignment(alignment: Alignment) -> dict[str, Any]:
    starts = [round(start * 1000) for start in alignment.starts]
    return {
        "chars": list(alignment.characters),
        "charStartTimesMs": starts,
        "charsDurationsMs": [
            max(0, round(end * 1000) - start)
            for start, end in zip(starts, alignment.ends, strict=True)
        ],
    }


async def run_input_stream(session: Session, prepared: Prepared) -> None:
    """The open session until the client ends its text and the last audio is out (or it
    leaves, or idles, or the node stops: the text received is spoken first); then its one
    log row and its bill."""
    context, ledger, channel = session.context, session.ledger, session.channel
    stream = InputStream(session, prepared)
    idle = context.settings.realtime_idle_seconds
    drain = context.settings.drain_timeout_seconds
    ends_at = time.monotonic() + context.settings.max_realtime_seconds
    ending: Ending | None = None
    capped: RateLimited | None = None
    stopping = False
    try:
        open_input = True
        while open_input:
            # Speaking ends before the client's last text only when it fails.
            message = await next_message(
                session, ends_at, idle, lambda: stream.busy, failed=stream.ended
            )
            if message == "stopping":  # the text received is spoken, then the node closes
                stream.end()
                stopping = True
                ends_at = min(ends_at, time.monotonic() + drain * FINISH_SHARE)
                break
            if message == "cut_off":
                ending = Ending.cut_off(session)
                break
            if message == "expired":
                ending = Ending("session_expired", "The session reached its time limit.")
                break
            if message == "idle":
                ending = Ending(
                    "input_timeout_exceeded", f"No text for {idle:g} s: the session ends."
                )
                break
            if message == "failed" or message["type"] == "websocket.disconnect":
                break
            try:
                open_input = await stream.handle(message.get("text") or message.get("bytes") or b"")
            except RateLimited as error:  # a monthly cap: the text past it was not taken
                ending, capped = Ending("rate_limited", error.message), error
                break
            if stream.failure is not None:
                break
        if ending is None and (stopping or not open_input or stream.failure is not None):
            left = max(0.0, ends_at - time.monotonic())
            spoken = await _spoken_or_gone(session, stream.ended, left)
            if session.cut_off.event.is_set():
                ending = Ending.cut_off(session)
            elif stopping:
                await channel.close(1012, "service restart")  # the client reconnects elsewhere
            elif spoken:
                await channel.close(1000 if stream.failure is None else 1011, "end of input")
    finally:
        await stream.close()
        if ending is not None:
            await channel.send({"error": ending.code, "message": ending.message})
            await channel.close(ending.close_code, ending.code)
        charge = Charge(UsageEndpoint.TEXT_TO_SPEECH, stream.delivered, prepared.voice.id)
        ended_by = session.cut_off.error or stream.failure or capped
        error_code = None if ended_by is None else ended_by.code
        await ledger.session_ended(charge, channel.bytes_sent, error_code)


async def _spoken_or_gone(session: Session, ended: asyncio.Event, seconds: float) -> bool:
    """Wait, after the client's last text, until the last audio is out (True), the client
    is gone, its key cut off or the session's time is up (False: speaking stops); what else
    it sends is not read."""
    spoken = asyncio.ensure_future(ended.wait())
    cut_off = asyncio.ensure_future(session.cut_off.event.wait())
    message: asyncio.Future[Any] | None = None
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = asyncio.ensure_future(session.channel.websocket.receive())
                await asyncio.wait({spoken, cut_off, message}, return_when=asyncio.FIRST_COMPLETED)
                if cut_off.done():
                    return False
                if spoken.done():
                    return True
                if message.result()["type"] == "websocket.disconnect":
                    return False
    except TimeoutError:
        return False
    finally:
        for waiting in (spoken, cut_off, message):
            if waiting is not None:
                waiting.cancel()


def _is_unicode(text: str) -> bool:
    """No lone surrogate (JSON's escapes can carry one; no engine can say it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
