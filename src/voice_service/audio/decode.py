"""Decode a whole audio file to mono float32 at a chosen rate, bounded in length.

The decode streams packet by packet, so memory holds the output and one frame at a time.
The duration is counted from decoded samples, because container headers can be wrong (or
lie on purpose): a few kilobytes of Opus or MP3 silence can decode to hours. We stop as soon
as the count passes `max_seconds`, so neither memory nor CPU time grows past that bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import av
import av.error
import numpy as np
import numpy.typing as npt

from voice_service.audio.formats import AudioFormat, demuxer_name

__all__ = ["AudioTooLong", "DecodedAudio", "UndecodableAudio", "decode_audio"]

DEFAULT_RATE = 16_000

# A corrupt stretch makes the decoder fail packet after packet; past this many failures in a
# row we treat the rest of the file as lost rather than spin over it.
_MAX_CONSECUTIVE_ERRORS = 32


class UndecodableAudio(Exception):
    """No audio could be decoded from the file."""


class AudioTooLong(Exception):
    """The decoded audio is longer than the allowed maximum."""

    def __init__(self, max_seconds: float) -> None:
        super().__init__(f"audio is longer than the maximum of {max_seconds:g} seconds")
        self.max_seconds = max_seconds


@dataclass(frozen=True, slots=True)
class DecodedAudio:
    samples: npt.NDArray[np.float32]  # mono, at `sample_rate`
    sample_rate: int
    duration_seconds: float  # from the decoded samples at the source rate


def decode_audio(
    path: Path,
    *,
    max_seconds: float,
    rate: int = DEFAULT_RATE,
    fmt: AudioFormat | None = None,
) -> DecodedAudio:
    """Decode the first audio stream of `path` to mono float32 at `rate`.

    `fmt` (from `identify_audio`) forces that container's demuxer so FFmpeg cannot re-guess.
    Raises `AudioTooLong` once more than `max_seconds` has decoded, and `UndecodableAudio`
    when nothing decodes. A truncated file returns the audio decoded before the damage.
    """
    try:
        container = av.open(
            str(path),
            format=demuxer_name(fmt) if fmt is not None else None,
            metadata_errors="ignore",
        )
    except av.error.FFmpegError as exc:
        raise UndecodableAudio("the file could not be opened as audio") from exc
    with container:
        if not container.streams.audio:
            raise UndecodableAudio("the file has no audio stream")
        return _decode_stream(container, container.streams.audio[0], max_seconds, rate)


def _decode_stream(
    container: av.container.InputContainer,
    stream: av.AudioStream,
    max_seconds: float,
    rate: int,
) -> DecodedAudio:
    resampler = _MonoResampler(rate)
    chunks: list[npt.NDArray[np.float32]] = []
    source_seconds = 0.0
    # Output is capped as well as input, so the bound holds whatever the resampler buffers.
    max_output = int(max_seconds * rate) + rate
    output_samples = 0
    failures = 0
    packets = container.demux(stream)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            break
        except av.error.FFmpegError:
            break  # truncated or damaged container: keep what decoded so far
        try:
            frames = packet.decode()
        except av.error.FFmpegError:
            failures += 1
            if failures > _MAX_CONSECUTIVE_ERRORS:
                break
            continue
        failures = 0
        for frame in frames:
            if frame.samples == 0 or frame.sample_rate <= 0:
                continue
            source_seconds += frame.samples / frame.sample_rate
            if source_seconds > max_seconds:
                raise AudioTooLong(max_seconds)
            for out in resampler.push(frame):
                output_samples += len(out)
                if output_samples > max_output:
                    raise AudioTooLong(max_seconds)
                chunks.append(out)
    if source_seconds == 0.0:
        raise UndecodableAudio("no audio could be decoded from the file")
    chunks.extend(resampler.flush())
    samples = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
    return DecodedAudio(samples=samples, sample_rate=rate, duration_seconds=source_seconds)


class _MonoResampler:
    """av.AudioResampler to mono float32, rebuilt when the input format changes.

    PyAV refuses a frame whose format, layout or rate differs from the first one it saw, and
    real files do change mid-stream (concatenated MP3s, chained Ogg streams).
    """

    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._resampler: av.AudioResampler | None = None
        self._input: tuple[str, str, int] | None = None

    def push(self, frame: av.AudioFrame) -> list[npt.NDArray[np.float32]]:
        key = (frame.format.name, frame.layout.name, frame.sample_rate)
        out: list[npt.NDArray[np.float32]] = []
        if self._resampler is None or key != self._input:
            out = self.flush()
            self._resampler = av.AudioResampler(format="flt", layout="mono", rate=self._rate)
            self._input = key
        return out + _arrays(self._resampler.resample(frame))

    def flush(self) -> list[npt.NDArray[np.float32]]:
        if self._resampler is None:
            return []
        return _arrays(self._resampler.resample(None))


def _arrays(frames: list[av.AudioFrame]) -> list[npt.NDArray[np.float32]]:
    # Packed mono float frames come out as shape (1, n).
    return [np.asarray(f.to_ndarray(), dtype=np.float32).reshape(-1) for f in frames]
