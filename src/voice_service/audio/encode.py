"""Encoding of engine output, chunk by chunk, into every format the API serves (PyAV).

Each chunk of PCM an engine yields goes in as it is made; what comes out is either bytes
ready to send now (a stream, written to an output that cannot seek) or one whole file at the
end (a seekable buffer, so the muxer can go back and write exact counts: MP3's Xing/LAME
header with the encoder delay and padding, WAV's sizes, FLAC's total samples).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any, Protocol

import av
import numpy as np
import numpy.typing as npt

from voice_service.audio.tempo import Tempo, pcm_frame
from voice_service.engines.protocols import EngineError, Pcm

DEFAULT_BITRATE = 64_000

# One MPEG-1 Layer III frame of silence stands in for no audio at all, so that every call
# returns a file that decoders accept instead of zero bytes.
_MIN_SAMPLES = 1152

# LAME at quality 7 instead of its default 3: a whole answer waits for the encoder after its
# last chunk, and listeners hear no difference (measured in docs/performance.md, "MP3
# encoder speed").
_CODEC_OPTIONS: dict[str, dict[str, str]] = {"libmp3lame": {"compression_level": "7"}}


class OutputFormat(StrEnum):
    """OpenAI's `response_format` names for what speech is encoded into."""

    MP3 = "mp3"
    OPUS = "opus"
    AAC = "aac"
    FLAC = "flac"
    WAV = "wav"
    PCM = "pcm"


@dataclass(frozen=True, slots=True)
class AudioFormat:
    """A container and codec, at the rate and bitrate the format fixes; `None` leaves the
    rate to the voice and the bitrate to the operator (`VOICE_SERVICE_MP3_BITRATE`)."""

    container: str
    codec: str
    media_type: str
    sample_rate: int | None = None
    bitrate: int | None = None  # lossy codecs only
    lossy: bool = False


FORMATS: dict[OutputFormat, AudioFormat] = {
    OutputFormat.MP3: AudioFormat("mp3", "libmp3lame", "audio/mpeg", lossy=True),
    # Opus runs at 48 kHz only (its other rates are decoder-side); in Ogg, as OpenAI sends it.
    OutputFormat.OPUS: AudioFormat("ogg", "libopus", "audio/ogg", 48_000, lossy=True),
    OutputFormat.AAC: AudioFormat("adts", "aac", "audio/aac", lossy=True),
    OutputFormat.FLAC: AudioFormat("flac", "flac", "audio/flac"),
    OutputFormat.WAV: AudioFormat("wav", "pcm_s16le", "audio/wav"),
    # Raw 16-bit little-endian mono at 24 kHz, as OpenAI documents its `pcm`.
    OutputFormat.PCM: AudioFormat("s16le", "pcm_s16le", "audio/pcm;rate=24000", 24_000),
}

MP3 = FORMATS[OutputFormat.MP3]


class AudioEncoder:
    """PCM chunks in, encoded bytes out, at `speed` (tempo without a pitch change).

    Only compressed bytes are held (8 kB per second of MP3 at 64 kbps), never the whole PCM.
    With `streaming`, `add` returns the bytes the muxer has written so far; otherwise they
    all come from `finish`, as one file with exact headers. Every chunk must have the first
    one's sample rate.
    """

    def __init__(
        self,
        fmt: AudioFormat,
        *,
        streaming: bool,
        bitrate: int = DEFAULT_BITRATE,
        speed: float = 1.0,
    ) -> None:
        self.format = fmt
        self._bitrate = fmt.bitrate or bitrate
        self._speed = speed
        self._output: _Output = _WriteOnly() if streaming else _Seekable()
        self.streaming = streaming
        self._container: av.container.OutputContainer | None = None
        self._stream: av.AudioStream | None = None
        self._tempo: Tempo | None = None
        self._source_rate = 0
        self._samples_in = 0
        self._samples_out = 0

    @property
    def sample_rate(self) -> int | None:
        """The output's rate: the format's, or the first chunk's (None before it)."""
        return self.format.sample_rate or self._source_rate or None

    def add(self, pcm: Pcm) -> bytes:
        """Encode one chunk; returns what is ready to send (always b"" unless streaming)."""
        try:
            self._add(pcm)
        except av.FFmpegError as error:  # e.g. a voice rate a codec cannot take
            raise EngineError(f"{self.format.codec} encoding failed: {error}") from error
        return self._ready()

    def finish(self) -> bytes:
        """Flush everything; returns the rest of the stream, or the whole file."""
        try:
            if self._samples_in == 0:
                rate = self._source_rate or 22_050
                self._add(Pcm(np.zeros(_MIN_SAMPLES, dtype=np.int16), rate))
            assert self._container is not None and self._stream is not None
            if self._tempo is not None:
                self._encode(self._tempo.flush())
            self._mux(self._stream.encode(None))
            self._container.close()  # writes the final headers where the output can seek
        except av.FFmpegError as error:
            raise EngineError(f"{self.format.codec} encoding failed: {error}") from error
        return self._output.take()

    def _ready(self) -> bytes:
        return self._output.take() if self.streaming else b""

    def _add(self, pcm: Pcm) -> None:
        if self._stream is None:
            self._open(pcm.sample_rate)
        elif pcm.sample_rate != self._source_rate:
            raise EngineError(
                f"a chunk at {pcm.sample_rate} Hz follows chunks at {self._source_rate} Hz"
            )
        if pcm.samples.size == 0:
            return
        frame = pcm_frame(pcm.samples, pcm.sample_rate, self._samples_in)
        self._samples_in += pcm.samples.size
        self._encode(self._tempo.push(frame) if self._tempo is not None else [frame])

    def _open(self, source_rate: int) -> None:
        self._source_rate = source_rate
        rate = self.format.sample_rate or source_rate
        self._container = av.open(self._output, mode="w", format=self.format.container)
        stream = self._container.add_stream(self.format.codec, rate=rate, layout="mono")
        assert isinstance(stream, av.AudioStream)
        if self.format.lossy:
            stream.bit_rate = self._bitrate
        stream.codec_context.options = _CODEC_OPTIONS.get(self.format.codec, {})
        self._stream = stream
        if self._speed != 1.0:
            self._tempo = Tempo(source_rate, self._speed)

    def _encode(self, frames: Iterable[av.AudioFrame]) -> None:
        assert self._stream is not None
        for frame in frames:
            # PyAV converts each frame to the codec's sample format and rate and re-chunks
            # it into the codec's frame size; pts count the frames' own samples.
            frame.pts = self._samples_out
            frame.time_base = Fraction(1, frame.sample_rate)
            self._samples_out += frame.samples
            self._mux(self._stream.encode(frame))

    def _mux(self, packets: Iterable[av.Packet[Any]]) -> None:
        assert self._container is not None
        for packet in packets:
            self._container.mux(packet)


def encode(pcm: Iterable[Pcm], fmt: AudioFormat, **options: Any) -> bytes:
    """Whole chunks as one file (see `AudioEncoder`)."""
    encoder = AudioEncoder(fmt, streaming=False, **options)
    for chunk in pcm:
        encoder.add(chunk)
    return encoder.finish()


def wav_of(samples: npt.NDArray[np.float32], rate: int) -> bytes:
    """Mono float samples within [-1, 1] as a 16-bit WAV file (what a provider is sent)."""
    pcm = Pcm(np.round(np.clip(samples, -1.0, 1.0) * 32767.0).astype(np.int16), rate)
    return encode([pcm], FORMATS[OutputFormat.WAV])


def encode_mp3(pcm: Pcm, bitrate: int = DEFAULT_BITRATE) -> bytes:
    """One whole buffer as an MP3 file."""
    return encode([pcm], MP3, bitrate=bitrate)


class _Output(Protocol):
    def write(self, data: bytes, /) -> int: ...

    def take(self) -> bytes:
        """What was written since the last take (streaming), or the whole file."""
        ...


class _WriteOnly:
    """An output that cannot seek: the muxer writes a streamable file and never goes back."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


class _Seekable(io.BytesIO):
    def take(self) -> bytes:
        return self.getvalue()
