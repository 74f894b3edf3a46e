"""One provider: its replicas, its HTTP client, and every call to it with retry and deadline.

A call goes to a replica (see `replicas`). A replica that refuses the connection, times out,
answers 5xx or 429, or answers something that is not what the protocol promises has failed:
the call is tried once more on another replica, if nothing has reached the client yet. Each
try has `timeout_seconds` (a speech stream: until its deadline). When that fails too, the
caller gets 502 PROVIDER_ERROR naming the provider and what went wrong, never its URL or key.
A 4xx other than 429 is the provider refusing this request (a text too long for it, say): no
retry, and the replica stays up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    aclosing,
    asynccontextmanager,
)
from typing import TypeVar

import httpx
import numpy as np

from voice_service.audio.encode import AudioEncoder, AudioFormat
from voice_service.core.errors import InvalidRequest, ProviderError
from voice_service.engines.alignment import Alignment
from voice_service.engines.protocols import Pcm, TranscribeOptions
from voice_service.inference.providers.config import ANY_LANGUAGE, ResolvedProvider
from voice_service.inference.providers.redaction import redacted, secrets_of
from voice_service.inference.providers.replicas import (
    FAILURES_TO_LEAVE_OUT,
    NoReplica,
    Replica,
    ReplicaSet,
)
from voice_service.inference.providers.wire import (
    MAX_JSON_BYTES,
    PCM_RATE,
    WIRES,
    AudioFile,
    Call,
    CloningWire,
    Garbage,
    RemoteTranscript,
    SpeechCall,
    TimedWire,
    Wire,
    error_message,
    shown_type,
    timed_speech_bytes,
)
from voice_service.kit.metrics.registry import Metrics

logger = logging.getLogger(__name__)
T = TypeVar("T")

# The longest wait for a TCP connection to a replica (the rest of the try's time is for the
# answer): a replica that is down is passed over quickly.
CONNECT_SECONDS = 5.0


class _ReplicaFailed(Exception):
    """This replica failed this call; `reason` is safe to show (no URL, no key)."""

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


class ProviderRefused(ProviderError):
    """The provider refused this request with a 4xx of its own (its credentials, a voice it
    does not have): not a fault of the replica, and nothing to retry."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.upstream_status = status


class ProviderRefusedInput(InvalidRequest):
    """The provider refused what the client sent (400, 413, 422: a text too long for it, a
    sample it cannot clone): the client's to change, so 400 here."""


# What a provider's refusal of the input becomes here; any other 4xx is a 502.
_INPUT_REFUSALS = frozenset({400, 413, 422})
# What a refusal means, in our words (never the provider's: they may quote credentials).
_REFUSALS = {
    400: "it did not accept the input",
    401: "it did not accept this node's credentials for it",
    403: "it does not allow this request with this node's credentials",
    404: "it does not have the voice or model asked for",
    413: "it found the input too large",
    422: "it did not accept the input",
}


class Provider:
    def __init__(self, resolved: ResolvedProvider, metrics: Metrics, max_queued: int) -> None:
        config = resolved.config
        self.config = config
        self.name = config.name
        self.wire: Wire = WIRES[config.kind]()
        self.replicas = ReplicaSet(config.urls, config.max_concurrency, max_queued)
        self._metrics = metrics
        self._secrets = secrets_of(resolved.api_key, config.urls)
        self._client = httpx.AsyncClient(
            headers=self.wire.headers(resolved.api_key),
            timeout=httpx.Timeout(
                config.timeout_seconds, connect=min(CONNECT_SECONDS, config.timeout_seconds)
            ),
            limits=httpx.Limits(
                max_connections=config.max_concurrency * len(config.urls),
                max_keepalive_connections=config.max_concurrency * len(config.urls),
            ),
            follow_redirects=False,
        )

    # -- what it declares -------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """Calls it takes at once: each replica's `max_concurrency`."""
        return self.config.max_concurrency * len(self.config.urls)

    def diarizes(self, options: TranscribeOptions, num_speakers: int | None) -> bool:
        """It tells the speakers apart itself for a request with `options` (as the client
        asked them) and a `num_speakers` hint: it is asked to (`transcription.diarize`),
        and can take the request whole. OpenAI's diarizing model takes no count of speakers
        and no prompt, and gives no word times."""
        section = self.config.transcription
        if section is None or not section.diarize:
            return False
        if self.wire.diarizing_model is not None:
            return num_speakers is None and not options.prompt and not options.word_timestamps
        return True

    def transcribes(self, language: str | None) -> bool:
        """Whether a transcription in `language` (None: not given) is routed here."""
        section = self.config.transcription
        if section is None:
            return False
        if language is None:
            return ANY_LANGUAGE in section.languages
        return ANY_LANGUAGE in section.languages or language in section.languages

    # -- calls ------------------------------------------------------------------------------

    async def transcribe(
        self, audio: AudioFile, options: TranscribeOptions, duration: float
    ) -> RemoteTranscript:
        """The provider's transcript of `audio` (`duration` seconds by our decoder)."""
        section = self.config.transcription
        model = section.model if section else None
        if section and options.diarize and self.wire.diarizing_model is not None:
            model = section.diarize_model or self.wire.diarizing_model
        call = self.wire.transcription(audio, options, model)

        async def parse(response: httpx.Response) -> RemoteTranscript:
            return self.wire.parse_transcription(await _read_bounded(response), options, duration)

        return await self._call(call, parse)

    async def add_voice(self, name: str, description: str | None, sample: AudioFile) -> str:
        """A new instant clone at the provider: its voice id there."""
        wire = self._cloning()

        async def parse(response: httpx.Response) -> str:
            return wire.parse_added_voice(await _read_bounded(response))

        return await self._call(wire.add_voice(name, description, sample), parse)

    async def delete_voice(self, voice_id: str) -> None:
        """Delete a clone at the provider; one it no longer has counts as deleted."""
        wire = self._cloning()

        async def parse(response: httpx.Response) -> None:
            await _read_bounded(response)

        try:
            await self._call(wire.delete_voice(voice_id), parse)
        except ProviderRefused as exc:
            if exc.upstream_status != 404:
                raise

    def speak(
        self,
        voice: str,
        text: str,
        fmt: AudioFormat,
        *,
        speed: float = 1.0,
        bitrate: int,
        streaming: bool,
        deadline: float,
    ) -> AsyncGenerator[bytes, None]:
        """`text` spoken by the provider in `fmt`, bytes as they arrive (re-encoded here only
        when the provider cannot make `fmt` itself), all of them by `deadline` (a
        `time.monotonic()` instant). Failures before the first byte are retried as any
        call's; after it, the stream ends with `ProviderError`."""
        model = self.config.speech.model if self.config.speech else None
        speech = self.wire.speech(voice, text, fmt, speed, model)
        # A whole file reaches the client only once made: a replica failing mid-way is then
        # retried like any call.
        chunks = self._stream(speech, deadline, whole=not streaming)
        if speech.passthrough:
            return chunks
        encoder = AudioEncoder(fmt, streaming=streaming, bitrate=bitrate, speed=speed)
        return _encoded(chunks, encoder)

    @property
    def reports_timestamps(self) -> bool:
        """Its API says when each character is spoken (ElevenLabs' does, OpenAI's not)."""
        return isinstance(self.wire, TimedWire)

    async def speak_timed(self, voice: str, text: str, fmt: AudioFormat) -> tuple[bytes, Alignment]:
        """`text` spoken by the provider in `fmt` (one of ElevenLabs' formats), with when each
        character is spoken: one whole answer, retried as any call."""
        wire = self._timed()
        model = self.config.speech.model if self.config.speech else None

        async def parse(response: httpx.Response) -> tuple[bytes, Alignment]:
            answer = await _read_bounded(response, timed_speech_bytes(len(text), fmt))
            return wire.parse_timed_speech(answer, text)

        return await self._call(wire.timed_speech(voice, text, fmt, model), parse)

    def _cloning(self) -> CloningWire:
        assert isinstance(self.wire, CloningWire), "the providers file lets only these clone"
        return self.wire

    def _timed(self) -> TimedWire:
        assert isinstance(self.wire, TimedWire), "asked only of a provider that reports times"
        return self.wire

    async def _call(
        self,
        call: Call,
        parse: Callable[[httpx.Response], Awaitable[T]],
    ) -> T:
        """One request, and one retry on another replica if a replica failed: each try
        within `timeout_seconds`, so a call takes at most twice that."""
        failed: tuple[Replica, _ReplicaFailed] | None = None
        while True:
            async with self._replica(failed) as replica:
                started = time.monotonic()
                try:
                    async with asyncio.timeout(self.config.timeout_seconds):
                        async with self._open(replica, call) as response:
                            await self._check_status(response)
                            result = await parse(response)
                except _REPLICA_FAILURES as exc:
                    failure = _replica_failure(exc, "did not answer in time")
                except (ProviderRefused, ProviderRefusedInput):
                    self._answered(replica, "rejected", started)
                    raise
                else:
                    self._answered(replica, "ok", started)
                    return result
                self._failed(replica, failure, started)
            if failed is not None:
                raise self._error(failure)
            failed = replica, failure

    async def _stream(
        self, speech: SpeechCall, deadline: float, *, whole: bool
    ) -> AsyncGenerator[bytes, None]:
        """The answer's bytes as they arrive, or with `whole` all of them once complete; an
        answer past `speech.max_bytes` is garbage (a replica that sends without end)."""
        failed: tuple[Replica, _ReplicaFailed] | None = None
        while True:
            async with self._replica(failed) as replica:
                started = time.monotonic()
                sent = False
                held: list[bytes] = []
                received = 0
                try:
                    async with AsyncExitStack() as stack:
                        # The deadline bounds each wait, never the time the client takes
                        # with a chunk (a timeout around a yield would cancel the client's
                        # task, not this call).
                        async with asyncio.timeout_at(_loop_time(deadline)):
                            response = await stack.enter_async_context(
                                self._open(replica, speech.call)
                            )
                            await self._check_status(response)
                        media_type = response.headers.get("content-type", "").lower()
                        if not media_type.startswith(speech.media_types):
                            shown = shown_type(media_type.split(";")[0].strip())
                            raise Garbage(f"answered {shown}, not audio")
                        chunks = response.aiter_bytes()
                        while True:
                            async with asyncio.timeout_at(_loop_time(deadline)):
                                chunk = await anext(chunks, None)
                            if chunk is None:
                                break
                            received += len(chunk)
                            if received > speech.max_bytes:
                                raise Garbage(
                                    f"answered more than the {speech.max_bytes} bytes of audio "
                                    "its text can take"
                                )
                            if whole:
                                held.append(chunk)
                            else:
                                sent = True
                                yield chunk
                    if not sent and not held:
                        raise Garbage("answered no audio at all")
                except _REPLICA_FAILURES as exc:
                    failure = _replica_failure(exc, "stopped sending in time")
                except (ProviderRefused, ProviderRefusedInput):
                    self._answered(replica, "rejected", started)
                    raise
                else:
                    self._answered(replica, "ok", started)
                    for chunk in held:
                        yield chunk
                    return
                self._failed(replica, failure, started)
            # Once audio has gone to the client another replica cannot take over.
            if sent or failed is not None:
                raise self._error(failure)
            failed = replica, failure

    def _open(self, replica: Replica, call: Call) -> AbstractAsyncContextManager[httpx.Response]:
        return self._client.stream(
            call.method,
            replica.url + call.path,
            params=call.params or None,
            json=call.json,
            data=call.data,
            files=call.files,
        )

    @asynccontextmanager
    async def _replica(
        self, failed: tuple[Replica, _ReplicaFailed] | None
    ) -> AsyncIterator[Replica]:
        """A replica for the first try, or for the retry after `failed` (another one)."""
        try:
            async with self.replicas.replica(exclude=failed[0] if failed else None) as replica:
                yield replica
        except NoReplica:
            if failed is not None:  # no other replica to retry on: the first failure stands
                raise self._error(failed[1]) from None
            raise ProviderError.of(
                f"The provider {self.name!r} is unavailable: every replica failed "
                f"{FAILURES_TO_LEAVE_OUT} requests in a row and is left out for now."
            ) from None

    async def _check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status >= 500 or status == 429:
            raise _ReplicaFailed(f"answered {status}")
        if status >= 400:
            try:
                said = error_message(await _read_bounded(response))
            except Garbage:
                said = "(an answer too long to read)"
            # Its words may quote this node's credentials: the operator reads them, redacted;
            # the tenant is told what happened in ours.
            logger.warning(
                "provider %s refused a request (%d): %s",
                self.name,
                status,
                redacted(said, self._secrets),
            )
            refusal = (
                f"The provider {self.name!r} refused the request ({status}): "
                f"{_REFUSALS.get(status, 'it gave no reason of ours to repeat')}. "
                "The operator can read its answer in the node's log."
            )
            if status in _INPUT_REFUSALS:
                raise ProviderRefusedInput(refusal)
            raise ProviderRefused(refusal, status)
        if not 200 <= status < 300:
            raise _ReplicaFailed(f"answered {status}")

    def _answered(self, replica: Replica, outcome: str, started: float) -> None:
        """The replica answered (a refusal is an answer too): it is healthy."""
        self.replicas.succeeded(replica)
        self._count(outcome, started)

    def _failed(self, replica: Replica, failure: _ReplicaFailed, started: float) -> None:
        self.replicas.failed(replica)
        self._count("timeout" if failure.timed_out else "error", started)
        logger.warning(
            "provider %s replica %s failed: %s", self.name, replica.shown_url, failure.reason
        )

    def _error(self, failure: _ReplicaFailed) -> ProviderError:
        return ProviderError.of(f"The provider {self.name!r} failed: {failure.reason}.")

    def _count(self, outcome: str, started: float) -> None:
        self._metrics.provider_called(self.name, outcome, time.monotonic() - started)

    async def close(self) -> None:
        await self._client.aclose()


async def _read_bounded(response: httpx.Response, limit: int = MAX_JSON_BYTES) -> httpx.Response:
    """The whole answer, read; one past `limit` bytes is garbage (a replica that sends
    without end must not fill this node's memory)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise Garbage(f"answered more than {limit} bytes")
    # Decoded already: of the headers only its type still holds.
    media_type = {"content-type": response.headers.get("content-type", "")}
    return httpx.Response(response.status_code, headers=media_type, content=bytes(body))


# What a replica failing a call raises (a refusal is the provider's answer, not a failure).
_REPLICA_FAILURES = (TimeoutError, httpx.HTTPError, Garbage, _ReplicaFailed)


def _replica_failure(exc: Exception, late: str) -> _ReplicaFailed:
    """How the replica failed, in words safe to show (`late`: what a timeout means here)."""
    if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
        return _ReplicaFailed(late, timed_out=True)
    if isinstance(exc, httpx.HTTPError):
        return _ReplicaFailed(_transport_failure(exc))
    if isinstance(exc, Garbage):
        return _ReplicaFailed(f"answered garbage: {exc}")
    assert isinstance(exc, _ReplicaFailed)
    return exc


def _transport_failure(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.ConnectError):
        return "refused the connection"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "closed the connection mid-answer"
    if isinstance(exc, httpx.ReadError):
        return "reset the connection"
    return f"could not be reached ({type(exc).__name__})"


def _loop_time(deadline: float) -> float:
    """A `time.monotonic()` instant on the event loop's clock."""
    loop = asyncio.get_running_loop()
    return loop.time() + (deadline - time.monotonic())


async def _encoded(
    chunks: AsyncGenerator[bytes, None], encoder: AudioEncoder
) -> AsyncGenerator[bytes, None]:
    """Raw 16-bit PCM at `PCM_RATE` from a provider, encoded chunk by chunk (off the loop)."""
    carry = b""
    async with aclosing(chunks):
        async for chunk in chunks:
            data = carry + chunk
            whole = len(data) - len(data) % 2  # a sample may straddle two chunks
            carry = data[whole:]
            if whole:
                pcm = Pcm(np.frombuffer(data[:whole], dtype="<i2").astype(np.int16), PCM_RATE)
                if encoded := await asyncio.to_thread(encoder.add, pcm):
                    yield encoded
    yield await asyncio.to_thread(encoder.finish)
