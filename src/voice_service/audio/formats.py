"""Recognise an uploaded audio file by its content.

Two gates, both required: the first bytes must carry the magic of a container we read, and
FFmpeg (PyAV), forced to that container's demuxer, must find an audio stream whose codec
the calling API accepts in that container and decode audio from its first packets. The
file name and the declared content type are never consulted: clients mislabel files, and a
name proves nothing.

What each API accepts is an `AcceptedAudio`: the native API the spec's five formats,
OpenAI's API the formats OpenAI lists (see `OPENAI_AUDIO` for what each name is by
content).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import av
import av.error
from av.stream import Discard, Disposition

__all__ = [
    "NATIVE_AUDIO",
    "OPENAI_AUDIO",
    "AcceptedAudio",
    "UnsupportedAudio",
    "UploadFormat",
    "demuxer_name",
    "identify_audio",
    "plausible_layout",
    "sniff_container",
    "use_only",
]

logger = logging.getLogger(__name__)


class UploadFormat(enum.Enum):
    """The container of an uploaded file, as its leading bytes announce it."""

    MP3 = "mp3"  # MPEG audio layer III frames, bare or behind an ID3 tag
    WAV = "wav"
    MP4 = "mp4"  # ISO base media (MPEG-4): what .m4a and .mp4 files both are
    WEBM = "webm"
    OGG = "ogg"
    FLAC = "flac"  # a native FLAC stream ("fLaC")


_PCM = frozenset({"pcm_u8", "pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "pcm_f64le"})
_OPUS_VORBIS = frozenset({"opus", "vorbis"})


@dataclass(frozen=True, slots=True)
class AcceptedAudio:
    """What one API accepts: audio codecs by container, and the names its clients know."""

    names: tuple[str, ...]  # in the API's own order, for its messages
    codecs: Mapping[UploadFormat, frozenset[str]]  # codec descriptor names
    # Containers whose video tracks make the file something this API does not take.
    no_video: frozenset[UploadFormat] = frozenset()

    @property
    def text(self) -> str:
        return ", ".join(self.names)


# The spec's five. An MPEG-4 file is an m4a only without a video track: with one, it is an
# mp4, which the spec does not list. WebM is a video container by name, so its video
# tracks are ignored, as they always were.
NATIVE_AUDIO = AcceptedAudio(
    names=("mp3", "wav", "m4a", "webm", "ogg"),
    codecs={
        UploadFormat.MP3: frozenset({"mp3"}),
        UploadFormat.WAV: _PCM,
        UploadFormat.MP4: frozenset({"aac"}),
        UploadFormat.WEBM: _OPUS_VORBIS,
        UploadFormat.OGG: _OPUS_VORBIS,
    },
    no_video=frozenset({UploadFormat.MP4}),
)

# OpenAI's list, which names file extensions. By content: mp3, mpga and mpeg are all MPEG
# audio (the audio/mpeg type; mpga and mpeg are its other extensions); m4a and mp4 are both
# MPEG-4 files (AAC, Apple Lossless or MP3 audio; a video track is ignored); ogg and oga
# are Ogg (Opus, Vorbis or FLAC); flac is a FLAC stream; wav and webm as natively.
OPENAI_AUDIO = AcceptedAudio(
    names=("flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"),
    codecs={
        **NATIVE_AUDIO.codecs,
        UploadFormat.MP4: frozenset({"aac", "alac", "mp3"}),
        UploadFormat.OGG: _OPUS_VORBIS | {"flac"},
        UploadFormat.FLAC: frozenset({"flac"}),
    },
)


class UnsupportedAudio(Exception):
    """The file is not audio in a format the API accepts (or does not decode)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Enough for every magic we check: an MPEG layer III frame is at most 1,441 bytes, so two
# headers fit, and the EBML header of a WebM file is a few dozen bytes.
_SNIFF_BYTES = 4096

# How many packets the probe may read before it must have produced audio. Decoders that need
# priming (AAC, Opus pre-skip) emit their first samples within a handful of packets.
_PROBE_PACKETS = 64


# The FFmpeg demuxer forced for each container, so FFmpeg cannot re-guess the format.
_DEMUXERS = {
    UploadFormat.MP3: "mp3",
    UploadFormat.WAV: "wav",
    UploadFormat.MP4: "mp4",
    UploadFormat.WEBM: "webm",
    UploadFormat.OGG: "ogg",
    UploadFormat.FLAC: "flac",
}

# Bounds a real recording stays within; anything outside is a crafted or broken header.
_MAX_CHANNELS = 8
_MIN_RATE = 4_000
_MAX_RATE = 384_000


def identify_audio(path: Path, accepted: AcceptedAudio = NATIVE_AUDIO) -> UploadFormat:
    """Return the container of the audio file at `path` if `accepted` takes the file, or
    raise `UnsupportedAudio`.

    Only the first packets are decoded; `decode_audio` reads the rest.
    """
    with path.open("rb") as f:
        head = f.read(_SNIFF_BYTES)
    fmt = sniff_container(head)
    if fmt is None:
        raise UnsupportedAudio("the content is not a recognised audio container")
    if fmt not in accepted.codecs:
        raise UnsupportedAudio(f"{fmt.value} files are not accepted here")
    _probe(path, fmt, accepted)
    return fmt


def sniff_container(head: bytes) -> UploadFormat | None:
    """The container the leading bytes announce, from magic numbers alone."""
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return UploadFormat.WAV
    if head[:4] == b"OggS":
        return UploadFormat.OGG
    if head[:4] == b"fLaC":
        return UploadFormat.FLAC
    if len(head) >= 8 and head[4:8] == b"ftyp":
        return UploadFormat.MP4
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return UploadFormat.WEBM if _ebml_doctype(head) == b"webm" else None
    if head[:3] == b"ID3" or _two_mpeg_frames(head):
        return UploadFormat.MP3
    return None


def demuxer_name(fmt: UploadFormat) -> str:
    """The FFmpeg demuxer to force for `fmt` (shared with the decoder)."""
    return _DEMUXERS[fmt]


def use_only(container: av.container.InputContainer, stream: av.AudioStream) -> None:
    """Have the demuxer skip every other stream's packets: a video track beside the audio
    costs neither reads nor memory."""
    for other in container.streams:
        if other.index != stream.index:
            other.discard = Discard.all


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


def _probe(path: Path, fmt: UploadFormat, accepted: AcceptedAudio) -> None:
    """Demux with the container's own demuxer and decode until audio comes out."""
    try:
        _probe_container(path, fmt, accepted)
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


def _probe_container(path: Path, fmt: UploadFormat, accepted: AcceptedAudio) -> None:
    with av.open(str(path), format=demuxer_name(fmt), metadata_errors="ignore") as container:
        if not container.streams.audio:
            raise UnsupportedAudio(f"the {fmt.value} file has no audio stream")
        if fmt in accepted.no_video and any(map(_is_video_track, container.streams.video)):
            raise UnsupportedAudio(f"the {fmt.value} file holds video")
        stream = container.streams.audio[0]
        _check_stream(stream, fmt, accepted)
        use_only(container, stream)
        if not _decodes_audio(container, stream):
            raise UnsupportedAudio(f"the {fmt.value} file does not decode")


def _is_video_track(stream: av.VideoStream) -> bool:
    # Cover art is shown by FFmpeg as a one-picture video stream; it is not video.
    return not stream.disposition & Disposition.attached_pic


def _check_stream(stream: av.AudioStream, fmt: UploadFormat, accepted: AcceptedAudio) -> None:
    """The stream's codec is one the API takes in the container, with a layout a recording
    could have."""
    context = stream.codec_context
    # PyAV leaves the codec context None (its stubs say otherwise) when FFmpeg has no
    # decoder for what the header declares, such as a WAV of 0 bits per sample.
    if context is None:
        raise UnsupportedAudio(f"the {fmt.value} file's audio codec is not recognised")
    codec = context.codec.canonical_name
    if codec not in accepted.codecs[fmt]:
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
