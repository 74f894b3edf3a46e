"""Decode a whole audio file to mono float32 at a chosen rate, bounded in length.

The decode streams packet by packet, so memory holds the output and one frame at a time.
The duration is counted from decoded samples, because container headers can be wrong (or
lie on purpose): a few kilobytes of Opus or MP3 silence can decode to hours. We stop as soon
as the count passes `max_seconds`, so neither memory nor CPU time grows past that bound.
Measuring a job's upload also believes a container that states it is too long, and refuses
it before decoding anything (a header that understates is still caught by the count).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import av.error
import numpy as np
import numpy.typing as npt

from voice_service.audio.formats import UploadFormat, demuxer_name, plausible_layout, use_only

__all__ = [
    "MEASURE_STEP_SECONDS",
    "AudioTooLong",
    "DecodedAudio",
    "NonFiniteAudio",
    "UndecodableAudio",
    "decode_audio",
    "decode_chunks",
    "measuring",
]

logger = logging.getLogger(__name__)

DEFAULT_RATE = 16_000

# A corrupt stretch makes the decoder fail packet after packet; past this many failures in a
# row we treat the rest of the file as lost rather than spin over it.
_MAX_CONSECUTIVE_ERRORS = 32

# A measurement reports (and, in the pool, hands its worker back) after this much audio:
# little decoding for a request to wait behind on a node of one worker, even in Opus's
# shortest frames, and few enough steps that handing the worker back costs nothing.
MEASURE_STEP_SECONDS = 60

# Containers whose duration FFmpeg takes from the container's own count of its audio:
# Ogg's last granule position, a WAV's data size (or, past the end of a cut-off file, its
# bytes: PCM holds as many samples as bytes allow), MP4's sample tables, WebM's Duration.
# Not MP3: without a Xing or VBRI frame count FFmpeg estimates the duration from the first
# frame's bit rate, many times too long for a VBR file that starts in silence.
_STATING = frozenset({UploadFormat.OGG, UploadFormat.WAV, UploadFormat.MP4, UploadFormat.WEBM})
# How far a stated duration may pass the limit and still be decoded: a container counts an
# encoder's delay (an Opus pre-skip, AAC priming) that decodes to no sample.
_STATED_SLACK = Fraction(1)
# Packed float frames carry the samples as a float WAV holds them.
_PACKED_FLOATS = frozenset({"flt", "dbl"})


class UndecodableAudio(Exception):
    """No audio could be decoded from the file."""


class NonFiniteAudio(Exception):
    """The decoded audio holds NaN or infinite samples."""

    def __init__(self) -> None:
        super().__init__("the audio holds samples that are not numbers (NaN or infinity)")


class AudioTooLong(Exception):
    """The decoded audio is longer than the allowed maximum."""

    def __init__(self, max_seconds: float) -> None:
        super().__init__(f"audio is longer than the maximum of {max_seconds:g} seconds")
        self.max_seconds = max_seconds


# What decode_audio refuses on purpose; anything else escaping PyAV is a surprise.
_REFUSALS = (AudioTooLong, NonFiniteAudio, UndecodableAudio)


@dataclass(frozen=True, slots=True)
class DecodedAudio:
    samples: npt.NDArray[np.float32]  # mono, at `sample_rate`, within [-1, 1]
    sample_rate: int
    # Exact: decoded samples over their rate, so whole seconds bill as whole seconds.
    duration_seconds: Fraction


def decode_audio(
    path: Path,
    *,
    max_seconds: float,
    rate: int = DEFAULT_RATE,
    fmt: UploadFormat | None = None,
    truncate: bool = False,
) -> DecodedAudio:
    """Decode the first audio stream of `path` to mono float32 at `rate`.

    `fmt` (from `identify_audio`) forces that container's demuxer so FFmpeg cannot re-guess.
    Raises `AudioTooLong` once more than `max_seconds` has decoded (with `truncate`, returns
    the first `max_seconds` instead), `NonFiniteAudio` as soon
    as a sample is NaN or infinite, and `UndecodableAudio` when nothing decodes. A truncated
    file returns the audio decoded before the damage.
    """
    chunks: list[npt.NDArray[np.float32]] = []
    seconds = Fraction(0)
    decoded = _decoded(path, max_seconds, rate, fmt)
    try:
        for chunk, counted in decoded:
            chunks.append(chunk)
            seconds = counted
    except _BoundReached:
        if not truncate:
            raise AudioTooLong(max_seconds) from None
        # What came before the bound, its length counted at the output rate.
        samples = _concatenate(chunks)
        return DecodedAudio(samples, rate, Fraction(samples.size, rate))
    return DecodedAudio(_concatenate(chunks), rate, seconds)


def decode_chunks(
    path: Path, *, max_seconds: float, rate: int = DEFAULT_RATE, fmt: UploadFormat | None = None
) -> Iterator[tuple[npt.NDArray[np.float32], Fraction]]:
    """`decode_audio` as it goes, for audio too long to hold whole: each piece of mono
    float32 at `rate` as it is decoded, with the exact seconds decoded so far (the last
    pair's are the file's duration). Raises as `decode_audio` does, `AudioTooLong` once
    the bound is passed."""
    try:
        yield from _decoded(path, max_seconds, rate, fmt)
    except _BoundReached:
        raise AudioTooLong(max_seconds) from None


def measuring(
    path: Path, *, max_seconds: float, fmt: UploadFormat | None = None
) -> Iterator[Fraction]:
    """The exact decoded duration of `path`, counted a step at a time without resampling
    or keeping any sample (what a job holds against caps before it runs): the seconds
    counted so far after every `MEASURE_STEP_SECONDS` of audio, the last the duration.

    Raises `AudioTooLong` before decoding when the container (of a `fmt` in `_STATING`)
    states more than `max_seconds`, else once more than that has decoded;
    `NonFiniteAudio` for a NaN or infinite sample of float PCM (compressed codecs' output
    is checked when the audio is decoded for use); `UndecodableAudio` as `decode_audio`."""
    with _refusals_only(path), _opened(path, fmt) as (container, stream):
        if fmt in _STATING and _stated(container, stream) > max_seconds + _STATED_SLACK:
            raise AudioTooLong(max_seconds)
        duration = _Duration(max_seconds)
        since_step = 0  # samples at the current frame's rate since the last report
        for frame in _frames(container, stream):
            if frame.samples == 0 or not plausible_layout(
                frame.layout.nb_channels, frame.sample_rate
            ):
                continue
            if not duration.add(frame.samples, frame.sample_rate):
                raise AudioTooLong(max_seconds)
            _refuse_non_finite(frame)
            since_step += frame.samples
            if since_step >= MEASURE_STEP_SECONDS * frame.sample_rate:
                since_step = 0
                yield duration.seconds
        if duration.seconds == 0:
            raise UndecodableAudio("no audio could be decoded from the file")
        yield duration.seconds


def _stated(container: av.container.InputContainer, stream: av.AudioStream) -> Fraction:
    """The duration the container states for the stream (0 if none)."""
    if stream.duration is not None and stream.time_base is not None:
        return max(Fraction(0), stream.duration * stream.time_base)
    if container.duration is not None:  # WebM states it for the whole file
        return max(Fraction(0), Fraction(container.duration, av.time_base))
    return Fraction(0)


def _refuse_non_finite(frame: av.AudioFrame) -> None:
    # Packed frames only: their one plane is safe to read (see `_samples` on planar ones).
    if frame.format.name in _PACKED_FLOATS and not np.isfinite(frame.to_ndarray()).all():
        raise NonFiniteAudio()


class _BoundReached(Exception):
    """More than the allowed seconds decoded."""


def _decoded(
    path: Path, max_seconds: float, rate: int, fmt: UploadFormat | None
) -> Iterator[tuple[npt.NDArray[np.float32], Fraction]]:
    with _refusals_only(path), _opened(path, fmt) as (container, stream):
        yield from _decode_stream(container, stream, max_seconds, rate)


@contextmanager
def _refusals_only(path: Path) -> Iterator[None]:
    try:
        yield
    except (*_REFUSALS, _BoundReached, GeneratorExit):
        raise
    except Exception as exc:
        if isinstance(exc, MemoryError) and not isinstance(exc, av.error.FFmpegError):
            raise  # this process is out of memory: the server's fault, not the file's
        # The last line at the untrusted-input boundary: PyAV wraps C libraries fed hostile
        # bytes, and whatever escapes them (a None where a codec was expected, a ValueError
        # from an absurd header) means this file is not audio we can use, never a 500.
        logger.warning("unexpected failure decoding %s: %r", path.name, exc, exc_info=exc)
        raise UndecodableAudio("the file could not be decoded") from exc


@contextmanager
def _opened(
    path: Path, fmt: UploadFormat | None
) -> Iterator[tuple[av.container.InputContainer, av.AudioStream]]:
    try:
        container = av.open(
            str(path),
            format=demuxer_name(fmt) if fmt is not None else None,
            metadata_errors="ignore",
        )
    except av.error.FFmpegError as exc:
        raise UndecodableAudio("the file could not be opened as audio") from exc
    with container:
        yield container, _audio_stream(container)


def _audio_stream(container: av.container.InputContainer) -> av.AudioStream:
    if not container.streams.audio:
        raise UndecodableAudio("the file has no audio stream")
    stream = container.streams.audio[0]
    # PyAV leaves the codec context None (its stubs say otherwise) when FFmpeg has no
    # decoder for what the header declares, such as a WAV of 0 bits per sample.
    if stream.codec_context is None:
        raise UndecodableAudio("the file's audio codec has no decoder")
    use_only(container, stream)
    return stream


def _decode_stream(
    container: av.container.InputContainer, stream: av.AudioStream, max_seconds: float, rate: int
) -> Iterator[tuple[npt.NDArray[np.float32], Fraction]]:
    resampler = _MonoResampler(rate)
    duration = _Duration(max_seconds)
    # Output is capped as well as input, so the bound holds whatever the resampler buffers.
    max_output = int(max_seconds * rate) + rate
    output_samples = 0
    for frame in _frames(container, stream):
        # A damaged stream can switch mid-way to a layout no recording has (an AAC frame of
        # 37 channels, found by fuzzing) that the resampler cannot mix: damage, skipped.
        if frame.samples == 0 or not plausible_layout(frame.layout.nb_channels, frame.sample_rate):
            continue
        if not duration.add(frame.samples, frame.sample_rate):
            raise _BoundReached()
        for out in resampler.push(frame):
            output_samples += len(out)
            if output_samples > max_output:
                raise _BoundReached()
            yield out, duration.seconds
    if duration.seconds == 0:
        raise UndecodableAudio("no audio could be decoded from the file")
    # The last pair carries the whole duration, even when the resampler holds no more.
    yield _concatenate(resampler.flush()), duration.seconds


def _concatenate(chunks: list[npt.NDArray[np.float32]]) -> npt.NDArray[np.float32]:
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)


def _frames(
    container: av.container.InputContainer, stream: av.AudioStream
) -> Iterator[av.AudioFrame]:
    """The stream's decoded frames, skipping damaged packets; a damaged container ends it."""
    failures = 0
    packets = container.demux(stream)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except av.error.FFmpegError:
            return  # truncated or damaged container: keep what decoded so far
        try:
            frames = packet.decode()
        except av.error.FFmpegError:
            failures += 1
            if failures > _MAX_CONSECUTIVE_ERRORS:
                return
            continue
        failures = 0
        yield from frames


class _Duration:
    """Exact decoded length, bounded: a whole sample count per run of one rate, runs summed
    as fractions, so no rate (11,025 Hz included) leaves a rounding error to bill.

    The bound is checked in integers per frame (a Fraction per frame cost ~10% of an Opus
    decode): the samples the current run may still hold are worked out once per rate.
    """

    def __init__(self, max_seconds: float) -> None:
        self._limit = Fraction(max_seconds)
        self._earlier = Fraction(0)
        self._rate = 0
        self._samples = 0
        self._allowed = 0

    def add(self, samples: int, rate: int) -> bool:
        """Count `samples` at `rate`; False once the count is past the bound."""
        if rate != self._rate:
            self._earlier = self.seconds
            self._rate, self._samples = rate, 0
            self._allowed = math.floor((self._limit - self._earlier) * rate)
        self._samples += samples
        return self._samples <= self._allowed

    @property
    def seconds(self) -> Fraction:
        if self._rate == 0:
            return self._earlier
        return self._earlier + Fraction(self._samples, self._rate)


class _MonoResampler:
    """av.AudioResampler to mono at `rate`, rebuilt when the input format changes.

    PyAV refuses a frame whose format, layout or rate differs from the first one it saw, and
    real files do change mid-stream (concatenated MP3s, chained Ogg streams). It resamples to
    float64 because a float64 sample beyond float32's range would come out as infinity, and
    a huge sample (clipped) must stay distinguishable from a non-number (refused).
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
            self._resampler = av.AudioResampler(format="dbl", layout="mono", rate=self._rate)
            self._input = key
        return out + _samples(self._resampler.resample(frame))

    def flush(self) -> list[npt.NDArray[np.float32]]:
        if self._resampler is None:
            return []
        return _samples(self._resampler.resample(None))


def _samples(frames: list[av.AudioFrame]) -> list[npt.NDArray[np.float32]]:
    """Resampled mono frames as float32 within [-1, 1]; raises `NonFiniteAudio`.

    Checked here rather than on the decoded frames: PyAV's `AudioFrame.planes` reads past
    the plane pointers of 8-channel planar audio and crashes the process (found by fuzzing).
    Any NaN or infinity in the input reaches this mono mix, except in a channel the downmix
    drops, which never reaches the model either.
    """
    arrays: list[npt.NDArray[np.float32]] = []
    for frame in frames:
        samples = frame.to_ndarray().reshape(-1)  # packed mono comes out as shape (1, n)
        # NaN or infinity sends Whisper into a minute-long loop of "!!!!"; no recording
        # holds one, so the file is refused rather than silently patched.
        if not np.isfinite(samples).all():
            raise NonFiniteAudio()
        # Huge finite samples (a float WAV of 1e30s) must not blow up the model's features.
        arrays.append(np.clip(samples, -1.0, 1.0).astype(np.float32))
    return arrays
