"""Recognise an uploaded audio file by its content.

Two gates, both required: the first bytes must carry the magic of one of the five accepted
containers, and FFmpeg (PyAV), forced to that container's demuxer, must find an audio stream
whose codec belongs in it and decode audio from its first packets. The file name and the
declared content type are never consulted: clients mislabel files, and a name proves nothing.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from pathlib import Path

import av
import av.error

__all__ = [
    "SUPPORTED_FORMATS_TEXT",
    "AudioFormat",
    "UnsupportedAudio",
    "demuxer_name",
    "identify_audio",
    "plausible_layout",
    "sniff_container",
]

logger = logging.getLogger(__name__)


class AudioFormat(enum.Enum):
    MP3 = "mp3"
    WAV = "wav"
    M4A = "m4a"
    WEBM = "webm"
    OGG = "ogg"


SUPPORTED_FORMATS_TEXT = "mp3, wav, m4a, webm, ogg"


class UnsupportedAudio(Exception):
    """The file is not audio in one of the supported formats (or does not decode)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; supported formats: {SUPPORTED_FORMATS_TEXT}")
        self.reason = reason


# Enough for every magic we check: an MPEG layer III frame is at most 1,441 bytes, so two
# headers fit, and the EBML header of a WebM file is a few dozen bytes.
_SNIFF_BYTES = 4096

# How many packets the probe may read before it must have produced audio. Decoders that need
# priming (AAC, Opus pre-skip) emit their first samples within a handful of packets.
_PROBE_PACKETS = 64


@dataclass(frozen=True, slots=True)
class _Container:
    demuxer: str  # FFmpeg demuxer we force, so FFmpeg cannot re-guess the format
    codecs: frozenset[str]  # accepted codec descriptor names


_CONTAINERS: dict[AudioFormat, _Container] = {
    AudioFormat.MP3: _Container("mp3", frozenset({"mp3"})),
    AudioFormat.WAV: _Container(
        "wav",
        frozenset(
            {"pcm_u8", "pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_f64le"},
        ),
    ),
    AudioFormat.M4A: _Container("mp4", frozenset({"aac"})),
    AudioFormat.WEBM: _Container("webm", frozenset({"opus", "vorbis"})),
    AudioFormat.OGG: _Container("ogg", frozenset({"opus", "vorbis"})),
}

# Bounds a real recording stays within; anything outside is a crafted or broken header.
_MAX_CHANNELS = 8
_MIN_RATE = 4_000
_MAX_RATE = 384_000


def identify_audio(path: Path) -> AudioFormat:
    """Return the format of the audio file at `path`, or raise `UnsupportedAudio`.

    Only the first packets are decoded; `decode_audio` reads the rest.
    """
    with path.open("rb") as f:
        head = f.read(_SNIFF_BYTES)
    fmt = sniff_container(head)
    if fmt is None:
        raise UnsupportedAudio("the content is not a recognised audio container")
    _probe(path, fmt)
    return fmt


def sniff_container(head: bytes) -> AudioFormat | None:
    """The container the leading bytes announce, from magic numbers alone."""
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return AudioFormat.WAV
    if head[:4] == b"OggS":
        return AudioFormat.OGG
    if len(head) >= 8 and head[4:8] == b"ftyp":
        return AudioFormat.M4A
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return AudioFormat.WEBM if _ebml_doctype(head) == b"webm" else None
    if head[:3] == b"ID3" or _two_mpeg_frames(head):
        return AudioFormat.MP3
    return None


def demuxer_name(fmt: AudioFormat) -> str:
    """The FFmpeg demuxer to force for `fmt` (shared with the decoder)."""
    return _CONTAINERS[fmt].demuxer


# --- MPEG audio frame headers -------------------------------------------------------------

# Layer III bitrates in kbit/s by bitrate index; index 0 ("free") and 15 are not accepted.
_BITRATES_V1_L3 = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)
_BITRATES_V2_L3 = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)
# Sample rates by version bits (3 = MPEG-1, 2 = MPEG-2, 0 = MPEG-2.5) and rate index.
_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}


@dataclass(frozen=True, slots=True)
class _MpegHeader:
    version: int
    sample_rate: int
    frame_length: int


def _mpeg_header(head: bytes, offset: int) -> _MpegHeader | None:
    """Parse an MPEG-1/2/2.5 layer III frame header at `offset`, or None if it is not one."""
    if offset + 4 > len(head):
        return None
    b0, b1, b2 = head[offset], head[offset + 1], head[offset + 2]
    if b0 != 0xFF or (b1 & 0xE0) != 0xE0:
        return None
    version = (b1 >> 3) & 0x3
    layer = (b1 >> 1) & 0x3
    bitrate_index = b2 >> 4
    rate_index = (b2 >> 2) & 0x3
    if version == 1 or layer != 1 or bitrate_index in (0, 15) or rate_index == 3:
        return None
    padding = (b2 >> 1) & 0x1
    sample_rate = _RATES[version][rate_index]
    if version == 3:
        bitrate = _BITRATES_V1_L3[bitrate_index] * 1000
        length = 144 * bitrate // sample_rate + padding
    else:
        bitrate = _BITRATES_V2_L3[bitrate_index] * 1000
        length = 72 * bitrate // sample_rate + padding
    return _MpegHeader(version, sample_rate, length)


def _two_mpeg_frames(head: bytes) -> bool:
    """A raw MP3 starts with a frame header whose length points at a second, matching one.

    One header alone is too weak: 0xFFEx/0xFFFx appears in plenty of other data.
    """
    first = _mpeg_header(head, 0)
    if first is None:
        return False
    second = _mpeg_header(head, first.frame_length)
    return (
        second is not None
        and second.version == first.version
        and second.sample_rate == first.sample_rate
    )


# --- EBML (Matroska / WebM) ---------------------------------------------------------------

_EBML_DOCTYPE_ID = 0x4282


def _read_vint(data: bytes, offset: int, *, keep_marker: bool) -> tuple[int, int] | None:
    """Read an EBML variable-length integer; return (value, next offset) or None."""
    if offset >= len(data):
        return None
    first = data[offset]
    length = 1
    mask = 0x80
    while length <= 8 and not first & mask:
        length += 1
        mask >>= 1
    if length > 8 or offset + length > len(data):
        return None
    value = first if keep_marker else first & (mask - 1)
    for byte in data[offset + 1 : offset + length]:
        value = (value << 8) | byte
    return value, offset + length


def _ebml_doctype(head: bytes) -> bytes | None:
    """The DocType inside the EBML header element at the start of `head`."""
    header_size = _read_vint(head, 4, keep_marker=False)
    if header_size is None:
        return None
    size, pos = header_size
    end = min(pos + size, len(head))
    while pos < end:
        element_id = _read_vint(head, pos, keep_marker=True)
        if element_id is None:
            return None
        element_size = _read_vint(head, element_id[1], keep_marker=False)
        if element_size is None:
            return None
        data_start = element_size[1]
        data_end = data_start + element_size[0]
        if element_id[0] == _EBML_DOCTYPE_ID:
            return head[data_start:data_end].rstrip(b"\x00")
        pos = data_end
    return None


# --- PyAV probe ---------------------------------------------------------------------------


def _probe(path: Path, fmt: AudioFormat) -> None:
    """Demux with the container's own demuxer and decode until audio comes out."""
    try:
        _probe_container(path, fmt)
    except UnsupportedAudio:
        raise
    except av.error.FFmpegError as exc:
        # ENOMEM included: it is FFmpeg refusing an absurd size that a header asked for.
        raise UnsupportedAudio(f"the {fmt.value} file does not decode") from exc
    except MemoryError:
        raise  # this process is out of memory: the server's fault, not the file's
    except Exception as exc:
        # The last line at the untrusted-input boundary: PyAV wraps C libraries fed hostile
        # bytes, and whatever escapes them means this file is not audio we take, never a 500.
        logger.warning("unexpected failure probing %s: %r", path.name, exc, exc_info=exc)
        raise UnsupportedAudio(f"the {fmt.value} file does not decode") from exc


def _probe_container(path: Path, fmt: AudioFormat) -> None:
    with av.open(str(path), format=demuxer_name(fmt), metadata_errors="ignore") as container:
        if not container.streams.audio:
            raise UnsupportedAudio(f"the {fmt.value} file has no audio stream")
        stream = container.streams.audio[0]
        _check_stream(stream, fmt)
        if not _decodes_audio(container, stream):
            raise UnsupportedAudio(f"the {fmt.value} file does not decode")


def _check_stream(stream: av.AudioStream, fmt: AudioFormat) -> None:
    """The stream's codec belongs in the container, with a layout a recording could have."""
    context = stream.codec_context
    # PyAV leaves the codec context None (its stubs say otherwise) when FFmpeg has no
    # decoder for what the header declares, such as a WAV of 0 bits per sample.
    if context is None:
        raise UnsupportedAudio(f"the {fmt.value} file's audio codec is not recognised")
    codec = context.codec.canonical_name
    if codec not in _CONTAINERS[fmt].codecs:
        raise UnsupportedAudio(f"codec {codec} is not supported in {fmt.value}")
    channels = context.channels
    rate = context.sample_rate
    if not plausible_layout(channels, rate):
        raise UnsupportedAudio(f"unsupported audio layout ({channels} ch, {rate} Hz)")


def plausible_layout(channels: int, rate: int) -> bool:
    """Whether a stream (or a frame of one) has a channel count and rate a recording could
    have; outside these bounds it is a crafted or broken header."""
    return 1 <= channels <= _MAX_CHANNELS and _MIN_RATE <= rate <= _MAX_RATE


def _decodes_audio(container: av.container.InputContainer, stream: av.AudioStream) -> bool:
    for count, packet in enumerate(container.demux(stream)):
        if count >= _PROBE_PACKETS:
            return False
        try:
            frames = packet.decode()
        except av.error.InvalidDataError:
            # Decoders resynchronise on the next packet; only a lasting failure counts.
            continue
        if any(frame.samples > 0 for frame in frames):
            return True
    return False
