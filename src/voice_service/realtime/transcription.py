"""OpenAI's Realtime transcription protocol: client events in, server events out.

Audio is appended to the input buffer as it arrives. With `server_vad` turn detection the
buffer is cut into turns where the speaker pauses (`SpeechDetector`): each turn is
announced (`speech_started`), transcribed in part while it is spoken (a `delta` at least
once a second of speech, when there is new text), and once the speaker stops, committed and
transcribed whole (`completed`). Without turn detection the client commits the buffer
itself. Turns are transcribed one after another, in the order they were committed; a turn
the node cannot serve in time gets an `error` event and a `failed` one, and the session
goes on. A bad client event gets an `error` event too.

Deltas never take back what they said: words are sent once two partial transcripts in a
row agree on them, and every later partial of the turn is decoded on from what was sent
(Whisper's prefix). The final transcript, in `completed`, is decoded afresh, as a batch
transcription of the turn's audio would be: where it hears better than the partials did
(it sees the whole turn, in Whisper's own 30 s window), it corrects what the deltas said.
It hears the turn up to `FINAL_TAIL` into the silence that ended it, so it is decoded ahead,
once that much silence has passed, on a worker nothing else needs: kept when the silence
lasts until the commit, dropped when the speaker goes on.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import math
from asyncio import current_task
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from voice_service.audio.vad import RATE, WINDOW, Floats, ServerVad, SpeechDetector
from voice_service.core.errors import ApiError, InternalError, session_message
from voice_service.core.ids import new_id
from voice_service.engines.protocols import TranscribeOptions
from voice_service.realtime.audio_in import InputAudio, InputFormat

logger = logging.getLogger(__name__)

# A partial transcript once this much more of a turn has been spoken; the first sooner.
PARTIAL_EVERY = RATE
FIRST_PARTIAL = RATE // 2
# A turn's final hears this much of the silence that ended it: it can be decoded this long
# after the speaker stops, before the commit, which waits for `silence_duration_ms` of it.
FINAL_TAIL = 3 * RATE // 10
# Seconds of audio Whisper encodes at once.
WHISPER_WINDOW = 30
# A turn this long is committed as if its speaker had paused (memory and latency bound).
MAX_TURN = 60 * RATE
# The most a buffer holds without turn detection; an append past it is refused.
MAX_BUFFER = 300 * RATE
# Committed turns waiting for the transcriber; one more is refused (failed), not queued.
MAX_WAITING_TURNS = 4
# A commit of less audio than this is refused, as OpenAI refuses it.
MIN_COMMIT = RATE // 10

Transcriber = Callable[[Floats, TranscribeOptions], Awaitable[str]]
# Told how many seconds the session will have received once a piece of audio is taken,
# before it is: raises (an `ApiError`, which ends the session) to refuse it.
AudioGate = Callable[[Fraction], Awaitable[None]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ClientError(Exception):
    """A client event the session cannot take; answered with an `error` event."""

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.param = code, message, param


@dataclass(frozen=True, slots=True)
class SessionConfig:
    format: InputFormat = InputFormat.PCM
    model: str = "whisper-1"  # as the client named it
    chosen_model: str | None = None  # the node's model it names; None: the default
    language: str | None = None
    prompt: str | None = None
    turn_detection: ServerVad | None = field(default_factory=ServerVad)

    def as_json(self, session_id: str) -> dict[str, Any]:
        audio_format: dict[str, Any] = {"type": self.format.value}
        if self.format is InputFormat.PCM:
            audio_format["rate"] = self.format.rate
        detection = self.turn_detection
        return {
            "type": "transcription",
            "id": session_id,
            "object": "realtime.transcription_session",
            "audio": {
                "input": {
                    "format": audio_format,
                    "transcription": {
                        "model": self.model,
                        "language": self.language,
                        "prompt": self.prompt,
                    },
                    "turn_detection": None
                    if detection is None
                    else {
                        "type": "server_vad",
                        "threshold": detection.threshold,
                        "prefix_padding_ms": detection.prefix_padding_ms,
                        "silence_duration_ms": detection.silence_duration_ms,
                    },
                    "noise_reduction": None,
                }
            },
            "include": [],
        }


@dataclass(frozen=True, slots=True)
class _Ahead:
    """A turn's final, decoded before its commit from its audio up to `end` (its text is
    None when the decode failed: the final is then decoded afresh)."""

    end: int  # session sample
    text: asyncio.Task[str | None]


@dataclass(slots=True)
class _Turn:
    item_id: str
    start: int  # session sample where its audio begins
    partial_at: int = 0  # samples of it spoken when its last partial was asked for
    sent: str = ""  # what its deltas have said so far
    heard: list[str] = field(default_factory=list)  # the words of its last partial
    settled: bool = False  # its last partial agreed with the one before on the same audio
    committed: bool = False
    ahead: _Ahead | None = None  # its final, decoded ahead of the commit


class TranscriptionSession:
    """One session's state. `handle` takes each client message; the session's own tasks
    (transcribing turns) send events through `send` as they finish."""

    def __init__(
        self,
        send: Send,
        transcribe: Transcriber,
        parse_language: Callable[[str | None], str | None],
        gate: AudioGate,
        spare_capacity: Callable[[], bool],
        *,
        parse_model: Callable[[str], str | None],
    ) -> None:
        self.id = new_id("sess")
        self._send = send
        self._transcribe = transcribe
        self._gate = gate
        self._spare_capacity = spare_capacity
        self._parse_language = parse_language
        self._parse_model = parse_model
        self.config = SessionConfig()
        self._input = InputAudio(self.config.format)
        self._detector: SpeechDetector | None = SpeechDetector(ServerVad())
        self._buffer = np.zeros(0, dtype=np.float32)
        self._buffer_start = 0  # session sample of the buffer's first sample
        self._turn: _Turn | None = None  # the turn being spoken (server VAD)
        self._previous_item: str | None = None
        # Each turn committed, its audio, and the part of it the final hears.
        self._committed: asyncio.Queue[tuple[_Turn, Floats, Floats]] = asyncio.Queue()
        self._finals = asyncio.create_task(self._transcribe_committed())
        self._partial: asyncio.Task[None] | None = None
        self._ahead: set[asyncio.Task[str | None]] = set()  # finals decoded ahead, running
        self._transcribing = False  # a committed turn is being transcribed
        self._earlier_seconds = Fraction(0)  # audio received before the format last changed
        self._failed_seconds = Fraction(0)  # audio of turns that were not transcribed

    @property
    def seconds_received(self) -> Fraction:
        """Exactly how much audio the client has sent, at its own rates."""
        return self._earlier_seconds + self._input.seconds_received

    @property
    def seconds_billed(self) -> Fraction:
        """What the session bills: the audio received, less the turns that failed (the audio
        between turns was listened to; a failed turn was not served)."""
        return max(Fraction(0), self.seconds_received - self._failed_seconds)

    @property
    def busy(self) -> bool:
        """A turn is being transcribed (in whole or in part), or waits to be."""
        partial = self._partial is not None and not self._partial.done()
        return partial or bool(self._ahead) or self._transcribing or not self._committed.empty()

    # --- client events --------------------------------------------------------------------

    async def created(self) -> None:
        await self._event("session.created", session=self.config.as_json(self.id))

    async def handle(self, message: str | bytes) -> None:
        """Take one client event; an `ApiError` from the audio gate ends the session."""
        event_id: str | None = None
        try:
            event = _parse(message)
            event_id = event.get("event_id") if isinstance(event.get("event_id"), str) else None
            kind = event.get("type")
            if kind == "input_audio_buffer.append":
                await self._append(event)
            elif kind == "session.update":
                await self._update(event)
            elif kind == "input_audio_buffer.commit":
                await self._commit_buffer()
            elif kind == "input_audio_buffer.clear":
                await self._clear()
            else:
                raise ClientError(
                    "unknown_event", f"Unknown event type {kind!r} for a transcription session."
                )
        except ClientError as error:
            await self._event(
                "error",
                error={
                    "type": "invalid_request_error",
                    "code": error.code,
                    "message": error.message,
                    "param": error.param,
                    "event_id": event_id,
                },
            )

    async def finish(self) -> None:
        """Transcribe what the session took (its node is stopping): the turn being spoken is
        committed as it stands, and every committed turn is transcribed."""
        turn, self._turn = self._turn, None
        end = self._buffer_start + self._buffer.size
        if turn is not None and end - turn.start >= MIN_COMMIT:
            await self._commit(turn, end)
        await self._committed.join()

    async def close(self) -> None:
        """Stop the session's own work (whatever is still transcribing is dropped)."""
        for task in (self._finals, self._partial, *self._ahead):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _update(self, event: dict[str, Any]) -> None:
        config = _session_config(
            event.get("session"), self.config, self._parse_language, self._parse_model
        )
        if config.format is not self.config.format:
            if self._buffer.size or self._turn is not None:
                raise ClientError(
                    "invalid_value",
                    "The input format can change only while the input buffer is empty.",
                    "session.audio.input.format",
                )
            self._earlier_seconds += self._input.seconds_received
            self._input = InputAudio(config.format)
        if config != self.config:  # a final decoded ahead had the settings before
            self._drop_ahead(self._turn)
        if config.turn_detection != self.config.turn_detection:
            self._detector = (
                None if config.turn_detection is None else SpeechDetector(config.turn_detection)
            )
            self._turn = None
        self.config = config
        await self._event("session.updated", session=config.as_json(self.id))

    async def _append(self, event: dict[str, Any]) -> None:
        audio = event.get("audio")
        if not isinstance(audio, str):
            raise ClientError("invalid_value", "audio must be a base64 string.", "audio")
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise ClientError("invalid_value", "audio is not valid base64.", "audio") from None
        await self._gate(self._earlier_seconds + self._input.seconds_with(data))
        samples = self._input.add(data)
        if self._detector is None and self._buffer.size + samples.size > MAX_BUFFER:
            raise ClientError(
                "input_audio_buffer_full",
                f"The input buffer holds at most {MAX_BUFFER // RATE} s: commit or clear it.",
            )
        self._buffer = np.concatenate([self._buffer, samples])
        if self._detector is not None:
            await self._detect(samples)

    async def _commit_buffer(self) -> None:
        if self._buffer.size < MIN_COMMIT:
            raise ClientError(
                "input_audio_buffer_commit_empty",
                "The input buffer holds less than 100 ms of audio: nothing to commit.",
            )
        turn = self._turn or _Turn(new_id("item"), self._buffer_start)
        self._turn = None
        await self._commit(turn, self._buffer_start + self._buffer.size)

    async def _clear(self) -> None:
        self._buffer_start += self._buffer.size
        self._buffer = np.zeros(0, dtype=np.float32)
        self._drop_ahead(self._turn)
        self._turn = None
        if self.config.turn_detection is not None:
            self._detector = SpeechDetector(self.config.turn_detection)
        await self._event("input_audio_buffer.cleared")

    # --- turns ----------------------------------------------------------------------------

    async def _detect(self, samples: Floats) -> None:
        assert self._detector is not None and self.config.turn_detection is not None
        padding = self.config.turn_detection.prefix_padding_ms * RATE // 1000
        for vad in self._detector.add(samples):
            if vad.kind == "started":
                start = max(self._buffer_start, vad.sample - padding)
                self._drop_before(start)
                self._turn = _Turn(new_id("item"), start)
                await self._event(
                    "input_audio_buffer.speech_started",
                    audio_start_ms=start * 1000 // RATE,
                    item_id=self._turn.item_id,
                )
            elif self._turn is not None:
                turn, self._turn = self._turn, None
                await self._event(
                    "input_audio_buffer.speech_stopped",
                    audio_end_ms=vad.sample * 1000 // RATE,
                    item_id=turn.item_id,
                )
                tail = None if vad.silent_from is None else vad.silent_from + FINAL_TAIL
                await self._commit(turn, vad.sample, tail)
        current = self._turn
        end = self._buffer_start + self._buffer.size
        if current is None:
            # Only what a turn's padding could reach back to is kept between turns.
            self._drop_before(end - padding - WINDOW)
        elif end - current.start >= MAX_TURN:
            await self._commit(current, end)
            self._turn = _Turn(new_id("item"), end)
            await self._event(
                "input_audio_buffer.speech_started",
                audio_start_ms=end * 1000 // RATE,
                item_id=self._turn.item_id,
            )
        else:
            self._decode_ahead(current)
            self._start_partial(current, PARTIAL_EVERY if current.partial_at else FIRST_PARTIAL)

    def _decode_ahead(self, turn: _Turn) -> None:
        """Decode `turn`'s final once its speaker has been silent for `FINAL_TAIL`, if the
        transcriber has nothing better to do (as for partials: no turn of this session
        waiting or being transcribed, a worker free); drop it if the speaker went on."""
        assert self._detector is not None
        silent_from = self._detector.silent_from
        end = None if silent_from is None else silent_from + FINAL_TAIL
        if turn.ahead is not None and turn.ahead.end != end:
            self._drop_ahead(turn)
        if end is None or turn.ahead is not None or self._buffer_start + self._buffer.size < end:
            return
        if self._transcribing or not self._committed.empty() or not self._spare_capacity():
            return
        audio = self._buffer[turn.start - self._buffer_start : end - self._buffer_start].copy()
        task = asyncio.create_task(self._final_ahead(audio))
        self._ahead.add(task)
        task.add_done_callback(self._ahead.discard)
        turn.ahead = _Ahead(end, task)

    def _drop_ahead(self, turn: _Turn | None) -> None:
        if turn is not None and turn.ahead is not None:
            turn.ahead.text.cancel()
            turn.ahead = None

    def _start_partial(self, turn: _Turn, after: int) -> None:
        """Transcribe `turn` so far if `after` more samples of it were spoken since its last
        partial, and the transcriber has nothing better to do: no partial still running,
        no committed turn waiting, a worker free (partials never queue: on a busy node
        they give way to whole turns, this session's and others')."""
        partial = self._partial
        running = partial is not None and not partial.done() and partial is not current_task()
        spoken = self._buffer_start + self._buffer.size - turn.start
        if running or not self._committed.empty() or spoken - turn.partial_at < after:
            return
        if turn.ahead is not None:  # its speaker is silent, and its final on its way
            return
        if not self._spare_capacity():
            return
        if spoken == turn.partial_at and turn.settled:
            return  # the same audio again would say the same
        turn.settled = spoken == turn.partial_at
        turn.partial_at = spoken
        audio = self._buffer[turn.start - self._buffer_start :].copy()
        self._partial = asyncio.create_task(self._transcribe_partial(turn, audio))

    async def _commit(self, turn: _Turn, end: int, heard_to: int | None = None) -> None:
        """Commit `turn`'s audio up to `end`; its final hears it up to `heard_to` (None:
        all of it)."""
        audio = self._buffer[turn.start - self._buffer_start : end - self._buffer_start].copy()
        heard = audio if heard_to is None else audio[: max(0, heard_to - turn.start)]
        self._drop_before(end)
        turn.committed = True
        await self._event(
            "input_audio_buffer.committed",
            item_id=turn.item_id,
            previous_item_id=self._previous_item,
        )
        self._previous_item = turn.item_id
        if self._committed.qsize() >= MAX_WAITING_TURNS:
            await self._failed(
                turn,
                audio,
                "too_many_turns",
                f"{MAX_WAITING_TURNS} turns are already waiting to be transcribed.",
            )
            self._drop_ahead(turn)
            return
        self._committed.put_nowait((turn, audio, heard))

    def _drop_before(self, sample: int) -> None:
        cut = min(max(0, sample - self._buffer_start), self._buffer.size)
        if cut:
            self._buffer = self._buffer[cut:]
            self._buffer_start += cut

    # --- transcription --------------------------------------------------------------------

    def _options(self) -> TranscribeOptions:
        return TranscribeOptions(
            language=self.config.language,
            prompt=self.config.prompt,
            model=self.config.chosen_model,
        )

    async def _transcribe_partial(self, turn: _Turn, audio: Floats) -> None:
        # Decoded on from what the deltas said, so that no later delta contradicts them. A
        # partial encodes a window just longer than the turn so far, about four times
        # cheaper than Whisper's 30 s for a short turn, and decodes once, without timestamp
        # tokens, three to five times cheaper again (docs/performance.md, figure 16).
        window = min(WHISPER_WINDOW, math.ceil(audio.size / RATE) + 1)
        options = replace(
            self._options(),
            prefix=turn.sent or None,
            window_seconds=window,
            timestamp_tokens=False,
        )
        try:
            text = await self._transcribe(audio, options)
        except ApiError as error:  # a partial is a nicety: the final will say it failed
            logger.debug("partial transcript of %s skipped: %s", turn.item_id, error.message)
            return
        except Exception:
            logger.exception("partial transcript of %s failed", turn.item_id)
            return
        # Words are said once two partials in a row agree on them (the last word of a
        # partial left out: the audio may have cut it off mid-way).
        heard = text.split()[:-1]
        agreed = " ".join(_common_start(turn.heard, heard))
        turn.heard = heard
        if turn.committed:
            return
        if _extends(agreed, turn.sent):
            delta, turn.sent = agreed[len(turn.sent) :], agreed
            await self._delta(turn, delta)
        elif self._turn is turn:
            # Nothing agreed yet: ask again at once, on whatever more has arrived (on the
            # same audio, it agrees with itself), so a speaker who pauses briefly still
            # sees their words.
            self._start_partial(turn, 0)

    async def _transcribe_committed(self) -> None:
        while True:
            self._transcribing = False
            turn, audio, heard = await self._committed.get()
            self._transcribing = True
            try:
                await self._transcribe_turn(turn, audio, heard)
            finally:
                self._committed.task_done()

    async def _final_ahead(self, audio: Floats) -> str | None:
        try:
            return await self._transcribe(audio, self._options())
        except ApiError as error:  # decoded afresh at the commit, which reports the error
            logger.debug("a final decoded ahead in %s failed: %s", self.id, error.message)
        except Exception:
            logger.exception("a final decoded ahead in %s failed", self.id)
        return None

    async def _taken_ahead(self, turn: _Turn, heard: Floats) -> str | None:
        """The final decoded ahead, if it heard what the final hears."""
        ahead, turn.ahead = turn.ahead, None
        if ahead is None:
            return None
        if ahead.end != turn.start + heard.size:
            ahead.text.cancel()
            return None
        return await ahead.text

    async def _transcribe_turn(self, turn: _Turn, audio: Floats, heard: Floats) -> None:
        # A partial still running is not waited for: its text, once the turn is committed,
        # is dropped (the final says it all). The final is what a batch transcription of
        # the turn says, not decoded on from the deltas: partials, in short windows, mishear
        # more (docs/performance.md, figure 16).
        try:
            text = await self._taken_ahead(turn, heard)
            if text is None:
                text = await self._transcribe(heard, self._options())
        except Exception as exc:
            if not isinstance(exc, ApiError):  # a bug: the session goes on without it
                logger.exception("a realtime turn of %s failed", self.id)
            error = exc if isinstance(exc, ApiError) else InternalError()
            message = session_message(error)
            await self._event(
                "error",
                error={
                    "type": "server_error" if error.status >= 500 else "invalid_request_error",
                    "code": error.code.lower(),
                    "message": f"Turn {turn.item_id} was not transcribed: {message}",
                    "param": None,
                    "event_id": None,
                },
            )
            await self._failed(turn, audio, error.code.lower(), message)
            return
        text = text.strip()
        if _extends(text, turn.sent):
            await self._delta(turn, text[len(turn.sent) :])
        await self._event(
            "conversation.item.input_audio_transcription.completed",
            item_id=turn.item_id,
            content_index=0,
            transcript=text,
            usage={"type": "duration", "seconds": round(audio.size / RATE, 3)},
        )

    async def _delta(self, turn: _Turn, delta: str) -> None:
        await self._event(
            "conversation.item.input_audio_transcription.delta",
            item_id=turn.item_id,
            content_index=0,
            delta=delta,
        )

    async def _failed(self, turn: _Turn, audio: Floats, code: str, message: str) -> None:
        """The turn is not transcribed, and its audio not billed."""
        seconds = Fraction(audio.size, RATE)
        self._failed_seconds += seconds
        billing = f"Its {float(seconds):.3f} s of audio are not billed."
        await self._event(
            "conversation.item.input_audio_transcription.failed",
            item_id=turn.item_id,
            content_index=0,
            error={"type": "transcription_error", "code": code, "message": f"{message} {billing}"},
        )

    async def _event(self, kind: str, **fields: Any) -> None:
        await self._send({"type": kind, "event_id": new_id("event"), **fields})


def _common_start(first: list[str], second: list[str]) -> list[str]:
    common = []
    for one, other in zip(first, second, strict=False):
        if one != other:
            break
        common.append(one)
    return common


def _extends(text: str, sent: str) -> bool:
    """`text` says more than `sent`, and the same before that (a partial may have had
    "and" where the whole turn, with its start seen as a sentence's, has "And")."""
    return len(text) > len(sent) and text[: len(sent)].casefold() == sent.casefold()


def _parse(message: str | bytes) -> dict[str, Any]:
    try:
        event = json.loads(message)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ClientError("invalid_json", "The message is not a JSON object.") from None
    if not isinstance(event, dict):
        raise ClientError("invalid_json", "The message is not a JSON object.")
    return event


def _session_config(
    session: object,
    current: SessionConfig,
    parse_language: Callable[[str | None], str | None],
    parse_model: Callable[[str], str | None],
) -> SessionConfig:
    """`current` with what a `session.update`'s session changes (OpenAI's GA shape)."""
    if not isinstance(session, dict):
        raise ClientError("invalid_value", "session must be an object.", "session")
    if session.get("type", "transcription") != "transcription":
        raise ClientError(
            "invalid_value",
            "This is a transcription session: session.type is transcription.",
            "session.type",
        )
    audio = _object(session, "audio", "session.audio")
    given = _object(audio, "input", "session.audio.input")
    config = current
    if "format" in given:
        config = replace(config, format=_format(given["format"]))
    if "transcription" in given:
        transcription = _object(given, "transcription", "session.audio.input.transcription")
        model = transcription.get("model", config.model)
        prompt = transcription.get("prompt", config.prompt)
        language = transcription.get("language", config.language)
        if not isinstance(model, str) or not isinstance(prompt, str | None):
            raise ClientError(
                "invalid_value",
                "model and prompt are strings.",
                "session.audio.input.transcription",
            )
        if language is not None and not isinstance(language, str):
            raise ClientError(
                "invalid_value",
                "language is a string.",
                "session.audio.input.transcription.language",
            )
        try:
            code = parse_language(language)
        except ApiError as error:
            raise ClientError(
                "invalid_value", error.message, "session.audio.input.transcription.language"
            ) from None
        try:
            chosen = parse_model(model)
        except ApiError as error:
            raise ClientError(
                "invalid_value", error.message, "session.audio.input.transcription.model"
            ) from None
        config = replace(
            config, model=model, chosen_model=chosen, prompt=prompt or None, language=code
        )
    if "turn_detection" in given:
        config = replace(config, turn_detection=_turn_detection(given["turn_detection"]))
    return config


def _object(parent: dict[str, Any], name: str, param: str) -> dict[str, Any]:
    value = parent.get(name, {})
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ClientError("invalid_value", f"{param} must be an object.", param)
    return value


def _format(value: object) -> InputFormat:
    param = "session.audio.input.format"
    if not isinstance(value, dict):
        raise ClientError("invalid_value", f"{param} must be an object.", param)
    try:
        fmt = InputFormat(str(value.get("type")))
    except ValueError:
        names = ", ".join(fmt.value for fmt in InputFormat)
        raise ClientError("invalid_value", f"{param}.type must be one of {names}.", param) from None
    if fmt is InputFormat.PCM and value.get("rate", fmt.rate) != fmt.rate:
        raise ClientError("invalid_value", "audio/pcm is taken at 24000 Hz only.", param)
    return fmt


def _turn_detection(value: object) -> ServerVad | None:
    param = "session.audio.input.turn_detection"
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") != "server_vad":
        raise ClientError("invalid_value", f"{param} is null or of type server_vad.", param)
    defaults = ServerVad()
    threshold = value.get("threshold", defaults.threshold)
    padding = value.get("prefix_padding_ms", defaults.prefix_padding_ms)
    silence = value.get("silence_duration_ms", defaults.silence_duration_ms)
    if not isinstance(threshold, int | float) or not 0.0 < threshold < 1.0:
        raise ClientError("invalid_value", "threshold is a number between 0 and 1.", param)
    for name, number in (("prefix_padding_ms", padding), ("silence_duration_ms", silence)):
        if not isinstance(number, int) or isinstance(number, bool) or not 0 <= number <= 10_000:
            raise ClientError("invalid_value", f"{name} is a whole number, 0 to 10000.", param)
    return ServerVad(float(threshold), padding, silence)
