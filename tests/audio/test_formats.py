"""Content sniffing and the PyAV probe, on real files made with PyAV in every variant."""

from __future__ import annotations

import os
import struct
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.helpers import speech_clips as sc
from tests.helpers import wav
from voice_service.audio.formats import (
    NATIVE_AUDIO,
    OPENAI_AUDIO,
    AcceptedAudio,
    UnsupportedAudio,
    UploadFormat,
    identify_audio,
    sniff_container,
)

EXPECTED = {
    "mp3": UploadFormat.MP3,
    "mp3-no-id3": UploadFormat.MP3,
    "wav-u8": UploadFormat.WAV,
    "wav-s16": UploadFormat.WAV,
    "wav-s24": UploadFormat.WAV,
    "wav-s32": UploadFormat.WAV,
    "wav-f32": UploadFormat.WAV,
    "wav-stereo-48k": UploadFormat.WAV,
    "m4a": UploadFormat.MP4,
    "webm-opus": UploadFormat.WEBM,
    "webm-vorbis": UploadFormat.WEBM,
    "ogg-opus": UploadFormat.OGG,
    "ogg-vorbis": UploadFormat.OGG,
    "m4a-cover": UploadFormat.MP4,
}
# What only OpenAI's API accepts, each the container its content is.
OPENAI_EXPECTED = {
    "flac": UploadFormat.FLAC,
    "ogg-flac": UploadFormat.OGG,
    "mp4-alac": UploadFormat.MP4,
    "mp4-mp3": UploadFormat.MP4,
    "mp4-video": UploadFormat.MP4,
}


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("formats")
    pcm = sc.tone(1.0, rate=22050)
    variants = [*sc.FORMATS, *sc.OPENAI_FORMATS]
    return {v: sc.write_audio(folder / f"{v}.upload", pcm, v) for v in variants}


def test_every_variant_covered() -> None:
    assert set(EXPECTED) == set(sc.FORMATS)
    assert set(OPENAI_EXPECTED) == set(sc.OPENAI_FORMATS)


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_identifies_every_supported_variant(clips: dict[str, Path], variant: str) -> None:
    assert identify_audio(clips[variant]) is EXPECTED[variant]
    assert identify_audio(clips[variant], OPENAI_AUDIO) is EXPECTED[variant]


@pytest.mark.parametrize("variant", sorted(OPENAI_EXPECTED))
def test_openai_formats_are_openai_only(clips: dict[str, Path], variant: str) -> None:
    assert identify_audio(clips[variant], OPENAI_AUDIO) is OPENAI_EXPECTED[variant]
    _reject(clips[variant])


def test_an_mp4_with_video_is_not_an_m4a(clips: dict[str, Path]) -> None:
    # Cover art is one attached picture, not video: the file is still an m4a.
    assert "holds video" in _reject(clips["mp4-video"]).reason
    assert identify_audio(clips["m4a-cover"]) is UploadFormat.MP4


def test_accepted_names() -> None:
    assert NATIVE_AUDIO.text == "mp3, wav, m4a, webm, ogg"
    # OpenAI's list as its API words it (oga being Ogg audio).
    assert OPENAI_AUDIO.names == (
        "flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"
    )  # fmt: skip


def test_mp3_without_id3_starts_with_a_frame(clips: dict[str, Path]) -> None:
    head = clips["mp3-no-id3"].read_bytes()[:4]
    assert head[0] == 0xFF
    assert clips["mp3"].read_bytes()[:3] == b"ID3"


def test_name_is_never_consulted(clips: dict[str, Path], tmp_path: Path) -> None:
    # A WAV called .mp3 is a WAV; an Ogg called .wav is an Ogg.
    wav_as_mp3 = tmp_path / "speech.mp3"
    wav_as_mp3.write_bytes(clips["wav-s16"].read_bytes())
    ogg_as_wav = tmp_path / "speech.wav"
    ogg_as_wav.write_bytes(clips["ogg-opus"].read_bytes())
    assert identify_audio(wav_as_mp3) is UploadFormat.WAV
    assert identify_audio(ogg_as_wav) is UploadFormat.OGG


def _reject(path: Path, accepted: AcceptedAudio = NATIVE_AUDIO) -> UnsupportedAudio:
    with pytest.raises(UnsupportedAudio) as caught:
        identify_audio(path, accepted)
    assert caught.value.reason
    return caught.value


def _reject_everywhere(path: Path) -> None:
    _reject(path, OPENAI_AUDIO)
    _reject(path, NATIVE_AUDIO)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"hello, this is plain text and not audio at all\n" * 20,
        b"\x89PNG\r\n\x1a\n" + bytes(200),
        b"%PDF-1.7\n" + bytes(200),
        b"\xff\xfb" + bytes(500),  # one MPEG-looking sync word, no valid frame pair
    ],
    ids=["empty", "text", "png", "pdf", "lone-sync"],
)
def test_rejects_junk(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "upload.mp3"
    path.write_bytes(content)
    _reject_everywhere(path)


def test_rejects_random_bytes(tmp_path: Path) -> None:
    path = tmp_path / "random.wav"
    path.write_bytes(os.urandom(64 * 1024))
    _reject_everywhere(path)


@pytest.mark.parametrize(
    "header",
    [
        b"RIFF\x24\x00\x01\x00WAVE",
        b"ID3\x04\x00\x00\x00\x00\x00\x00",
        b"OggS\x00\x02" + bytes(22),
        b"\x00\x00\x00\x1cftypM4A \x00\x00\x02\x00isomiso2",
        b"fLaC\x00\x00\x00\x22" + bytes(34),
        # EBML header with DocType "webm"
        b"\x1a\x45\xdf\xa3\x8fB\x82\x84webmB\x87\x81\x04B\x85\x81\x02",
    ],
    ids=["wav", "id3", "ogg", "m4a", "flac", "webm"],
)
def test_rejects_valid_magic_followed_by_garbage(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / "upload"
    path.write_bytes(header + np.random.default_rng(1).bytes(32 * 1024))
    assert sniff_container(path.read_bytes()[:4096]) is not None
    _reject_everywhere(path)


def test_rejects_truncated_m4a(clips: dict[str, Path], tmp_path: Path) -> None:
    # PyAV writes the moov atom last, so a cut m4a has no index and cannot be read.
    path = tmp_path / "cut.m4a"
    path.write_bytes(clips["m4a"].read_bytes()[:2000])
    _reject_everywhere(path)


def test_accepts_truncated_wav(clips: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "cut.wav"
    data = clips["wav-s16"].read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert identify_audio(path) is UploadFormat.WAV


def _write(path: Path, demuxer: str, codec: str, fmt: str, layout: str = "mono") -> Path:
    with av.open(str(path), "w", format=demuxer) as container:
        stream = container.add_stream(codec, rate=16000, layout=layout)
        assert isinstance(stream, av.AudioStream)
        stream.codec_context.format = fmt
        frame = av.AudioFrame.from_ndarray(
            sc.tone(0.5).samples.reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = 16000
        frame.pts = 0
        frame.time_base = Fraction(1, 16000)
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return path


@pytest.mark.parametrize(
    ("demuxer", "codec", "fmt"),
    [
        ("wav", "pcm_alaw", "s16"),  # telephony codec in a WAV
        ("matroska", "libopus", "s16"),  # Matroska, not WebM (DocType "matroska")
        ("mp4", "libopus", "s16"),  # Opus in MPEG-4: neither API lists it
    ],
)
def test_rejects_other_codecs_and_containers(
    tmp_path: Path, demuxer: str, codec: str, fmt: str
) -> None:
    _reject_everywhere(_write(tmp_path / "other", demuxer, codec, fmt))


@pytest.mark.parametrize(
    "content",
    [
        wav.zero_bit_wav(),
        wav.wav_bytes(bytes(3200), rate=16000, channels=0),
        wav.wav_bytes(bytes(3200), rate=0),
        wav.wav_bytes(bytes(3200), rate=16000, format_tag=0xFFFF),
    ],
    ids=["0-bits", "0-channels", "0-hz", "unknown-format-tag"],
)
def test_rejects_impossible_wav_headers(tmp_path: Path, content: bytes) -> None:
    # The 0-bit header once left PyAV's codec context None and the probe raised
    # AttributeError, a 500.
    path = tmp_path / "odd.wav"
    path.write_bytes(content)
    _reject_everywhere(path)


def test_rejects_m4a_whose_index_asks_for_absurd_memory(
    clips: dict[str, Path], tmp_path: Path
) -> None:
    # 2^31 time-to-sample entries: FFmpeg refuses the allocation with ENOMEM, which PyAV
    # raises as a MemoryError; it is the file's fault, not the server's (found by fuzzing).
    data = bytearray(clips["m4a"].read_bytes())
    stts = data.index(b"stts")
    data[stts + 8 : stts + 12] = struct.pack(">I", 0x7FFFFFFF)
    path = tmp_path / "absurd.m4a"
    path.write_bytes(bytes(data))
    assert isinstance(_reject(path).__cause__, MemoryError)


def test_unexpected_pyav_failure_is_a_refusal_and_logged(
    clips: dict[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Whatever PyAV throws on a hostile file (here an error it has no reason to raise)
    # is the file's fault, so a refusal, with the exception kept in the log.
    def broken_open(*args: object, **kwargs: object) -> None:
        raise ValueError("surprise")

    monkeypatch.setattr(av, "open", broken_open)
    assert "does not decode" in _reject(clips["wav-s16"]).reason
    assert any(r.levelname == "WARNING" and r.exc_info for r in caplog.records)


def test_rejects_container_without_audio(tmp_path: Path) -> None:
    path = tmp_path / "video.webm"
    with av.open(str(path), "w", format="webm") as container:
        stream = container.add_stream("libvpx", rate=10)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        frame = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    _reject_everywhere(path)


def test_sniff_needs_two_consistent_mpeg_frames() -> None:
    # MPEG-1 layer III, 128 kbit/s, 44.1 kHz, no padding: 417-byte frames.
    header = b"\xff\xfb\x90\x00"
    frame = header + bytes(413)
    assert sniff_container(frame + frame) is UploadFormat.MP3
    assert sniff_container(frame + bytes(417)) is None
    assert (
        sniff_container(b"\xff\xfd\x90\x00" + bytes(413) + b"\xff\xfd\x90\x00") is None
    )  # layer II
