"""Real audio for tests: speech from Piper and espeak-ng, written with PyAV in every format.

A plain helper module (not a conftest) so any test package can import it. Synthesis runs
once per process per text (lru_cache); every clip is short, because Whisper's cost depends
on 30 s windows, not on the words.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt

from tests.helpers.voices import JOE_KEY
from voice_service.engines.espeak import EspeakEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import Pcm

# Short English and German sentences with their reference transcripts.
ENGLISH_TEXT = "The quick brown fox jumps over the lazy dog near the river bank."
ENGLISH_TEXTS = (
    ENGLISH_TEXT,
    "Please send the quarterly report to the finance team before Friday afternoon.",
    "My favourite colour is green, and I like to walk in the park every morning.",
    "The weather today is sunny with a light breeze coming from the west.",
)
GERMAN_TEXT = "Guten Morgen, wie geht es Ihnen heute? Das Wetter ist sehr schön."
SPANISH_TEXT = "Buenos días, ¿cómo está usted? Hoy hace muy buen tiempo en la ciudad."

# name -> (demuxer, codec, sample format, layout, rate, options). Every variant the service
# accepts; the file suffix is deliberately neutral so nothing can lean on the name.
FORMATS: dict[str, tuple[str, str, str, str, int, dict[str, str]]] = {
    "mp3": ("mp3", "libmp3lame", "s16p", "mono", 22050, {}),
    "mp3-no-id3": ("mp3", "libmp3lame", "s16p", "mono", 22050, {"id3v2_version": "0"}),
    "wav-u8": ("wav", "pcm_u8", "u8", "mono", 16000, {}),
    "wav-s16": ("wav", "pcm_s16le", "s16", "mono", 22050, {}),
    "wav-s24": ("wav", "pcm_s24le", "s32", "mono", 44100, {}),
    "wav-s32": ("wav", "pcm_s32le", "s32", "mono", 8000, {}),
    "wav-f32": ("wav", "pcm_f32le", "flt", "mono", 16000, {}),
    "wav-stereo-48k": ("wav", "pcm_s16le", "s16", "stereo", 48000, {}),
    "m4a": ("mp4", "aac", "fltp", "mono", 44100, {}),
    "webm-opus": ("webm", "libopus", "s16", "mono", 48000, {}),
    "webm-vorbis": ("webm", "vorbis", "fltp", "stereo", 44100, {}),
    "ogg-opus": ("ogg", "libopus", "s16", "mono", 48000, {}),
    "ogg-vorbis": ("ogg", "vorbis", "fltp", "stereo", 22050, {}),
    "m4a-cover": ("mp4", "aac", "fltp", "mono", 44100, {}),  # with cover art (PICTURES)
}
# Variants that only the OpenAI-compatible API accepts (see OPENAI_AUDIO).
OPENAI_FORMATS: dict[str, tuple[str, str, str, str, int, dict[str, str]]] = {
    "flac": ("flac", "flac", "s16", "mono", 22050, {}),
    "ogg-flac": ("ogg", "flac", "s16", "mono", 22050, {}),
    "mp4-alac": ("mp4", "alac", "s16p", "mono", 44100, {}),
    "mp4-mp3": ("mp4", "libmp3lame", "s16p", "mono", 22050, {}),
    "mp4-video": ("mp4", "aac", "fltp", "mono", 44100, {}),  # beside a video track
}
# Variants written with a picture: a video track, or cover art (one attached picture).
PICTURES = {"m4a-cover": "cover", "mp4-video": "video"}


@functools.lru_cache(maxsize=16)
def english_speech(text: str = ENGLISH_TEXT) -> Pcm:
    """`text` spoken by the bundled Piper voice (22.05 kHz), through the service's engine:
    the same clip in every run (the packaged voice samples no noise)."""
    return _piper_engine().synthesize(JOE_KEY, text)


@functools.cache
def _piper_engine() -> PiperEngine:
    return PiperEngine()


@functools.lru_cache(maxsize=16)
def espeak_speech(text: str, voice: str) -> Pcm:
    """`text` spoken by espeak-ng voice `voice` ("de", "es"), via the service's engine."""
    return _espeak_engine().synthesize(f"espeak:{voice}", text)


_FRESH_ESPEAK = """
import sys
from voice_service.engines.espeak import EspeakEngine
pcm = EspeakEngine().synthesize("espeak:" + sys.argv[2], sys.argv[1])
sys.stdout.buffer.write(pcm.sample_rate.to_bytes(4, "little") + pcm.samples.tobytes())
"""


def fresh_espeak_speech(text: str, voice: str) -> Pcm:
    """`espeak_speech` as a newly started library makes it. espeak-ng's pitch flutter runs
    on from call to call within a process, so the same text comes out slightly different
    each time; a test whose outcome hangs on recognition takes its clip from here."""
    done = subprocess.run(  # noqa: S603 (our own interpreter, fixed code)
        [sys.executable, "-c", _FRESH_ESPEAK, text, voice], capture_output=True, check=True
    )
    rate = int.from_bytes(done.stdout[:4], "little")
    return Pcm(np.frombuffer(done.stdout[4:], dtype=np.int16).copy(), rate)


@functools.cache
def _espeak_engine() -> EspeakEngine:
    return EspeakEngine()


def to_float(pcm: Pcm) -> npt.NDArray[np.float32]:
    return (pcm.samples.astype(np.float32) / 32768.0).astype(np.float32)


def write_audio(
    path: Path, pcm: Pcm, variant: str, muxer_options: dict[str, str] | None = None
) -> Path:
    """Encode mono int16 `pcm` into `path` as FORMATS[variant] (or OPENAI_FORMATS[variant])
    with PyAV."""
    demuxer, codec, sample_format, layout, rate, options = {**FORMATS, **OPENAI_FORMATS}[variant]
    options = {**options, **(muxer_options or {})}
    with av.open(str(path), "w", format=demuxer, options=options) as container:
        picture = _picture_stream(container, PICTURES[variant]) if variant in PICTURES else None
        stream = container.add_stream(codec, rate=rate, layout=layout)
        assert isinstance(stream, av.AudioStream)
        if codec == "vorbis":
            # FFmpeg's native Vorbis encoder is marked experimental.
            stream.codec_context.options = {"strict": "experimental"}
        stream.codec_context.format = sample_format
        mono = pcm.samples.reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(mono, format="s16", layout="mono")
        frame.sample_rate = pcm.sample_rate
        frame.pts = 0
        frame.time_base = Fraction(1, pcm.sample_rate)
        if picture is not None:
            _mux_pictures(container, picture, pcm.duration_seconds)
        # PyAV converts format, layout and rate and cuts the encoder's frame sizes itself.
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def _picture_stream(container: av.container.OutputContainer, kind: str) -> av.VideoStream:
    """A tiny video track (`kind` "video") or cover art ("cover", which FFmpeg shows as a
    one-picture stream marked attached_pic)."""
    stream = container.add_stream("mjpeg" if kind == "cover" else "mpeg4", rate=1)
    assert isinstance(stream, av.VideoStream)
    stream.width = stream.height = 16
    stream.pix_fmt = "yuvj420p" if kind == "cover" else "yuv420p"
    if kind == "cover":
        stream.disposition = av.stream.Disposition.attached_pic
    return stream


def _mux_pictures(
    container: av.container.OutputContainer, stream: av.VideoStream, seconds: float
) -> None:
    """One picture for cover art, one a second for a video track."""
    count = 1 if stream.disposition & av.stream.Disposition.attached_pic else int(seconds) + 1
    for index in range(count):
        picture = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
        picture.pts = index
        for packet in stream.encode(picture):
            container.mux(packet)
    for packet in stream.encode(None):
        container.mux(packet)


def silence(seconds: float, rate: int = 16000) -> Pcm:
    return Pcm(samples=np.zeros(int(seconds * rate), dtype=np.int16), sample_rate=rate)


def tone(seconds: float, rate: int = 16000, hz: float = 440.0) -> Pcm:
    t = np.arange(int(seconds * rate)) / rate
    samples = (0.3 * 32767 * np.sin(2 * np.pi * hz * t)).astype(np.int16)
    return Pcm(samples=samples, sample_rate=rate)


def long_silent_ogg_opus(path: Path, seconds: float) -> Path:
    """A small Ogg Opus file that decodes to `seconds` of silence.

    Encoding hours of audio would be slow, so we encode 120 ms of silence once and mux that
    one packet again and again: a 2-hour file is a few hundred kilobytes, the shape of a
    "decompression bomb" upload.
    """
    packet_seconds = 0.12
    with av.open(str(path), "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=48000, layout="mono")
        stream.codec_context.options = {"frame_duration": "120", "b": "6000"}
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 48000), dtype=np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = 48000
        frame.pts = 0
        frame.time_base = Fraction(1, 48000)
        packets = [p for p in stream.encode(frame)] + [p for p in stream.encode(None)]
        template = bytes(packets[len(packets) // 2])
        step = int(packet_seconds * 48000)
        for index in range(int(seconds / packet_seconds)):
            packet = av.Packet(template)
            packet.stream = stream
            packet.time_base = Fraction(1, 48000)
            packet.pts = packet.dts = index * step
            packet.duration = step
            container.mux(packet)
    return path
