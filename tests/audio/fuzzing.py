"""What the fuzzers share: seed files in every accepted variant, mutations, one case's run.

A case is a seed variant plus a short list of mutations, so it is small to describe and
cheap to replay; both the suite's hypothesis test and the `fuzz` harness go through
`run_case`, the path an upload takes: `identify_audio`, then `decode_audio` (a job's upload
is measured first, with `measuring`).
"""

from __future__ import annotations

import logging
import random
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.helpers import speech_clips as sc
from voice_service.audio.decode import (
    AudioTooLong,
    NonFiniteAudio,
    UndecodableAudio,
    decode_audio,
    measuring,
)
from voice_service.audio.formats import (
    OPENAI_AUDIO,
    UnsupportedAudio,
    UploadFormat,
    identify_audio,
)
from voice_service.engines.protocols import Pcm

# The service's own bound (Settings.max_audio_seconds), so a mutation that inflates the
# audio costs what it would cost the service.
MAX_SECONDS = 1800.0
SEED_SECONDS = 0.25

# The native API's five and what OpenAI's API adds (FLAC; MPEG-4 with other codecs or a
# video track). Cases run under OPENAI_AUDIO, which accepts every one, so each reaches its
# demuxer and decoder; the native API differs only in which codecs it takes.
FORMATS = ("mp3", "wav", "m4a", "webm", "ogg", "flac", "mp4")
# Outcomes that are answers, not findings: decoded audio or one of the refusals the
# service maps to 400/415.
REFUSALS = (UnsupportedAudio, UndecodableAudio, AudioTooLong, NonFiniteAudio)
EXPECTED_OUTCOMES = frozenset({"decoded", *(cls.__name__ for cls in REFUSALS)})

# "checksum" recomputes Ogg page CRCs, without which FFmpeg drops every mutated Ogg page
# before a codec parser sees it; on other containers it changes nothing.
KINDS = ("flip", "truncate", "insert", "header", "field", "duplicate", "checksum")
# Values that break parsers: zero, one, sign bits, all ones, powers of two near limits.
INTERESTING = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF)
# Where container headers keep the fields worth overwriting (RIFF fmt, Ogg/Opus/Vorbis
# headers, the EBML header, ID3 and the first MPEG frames).
HEADER_SPAN = 128
MAX_CHUNK = 256


@dataclass(frozen=True, slots=True)
class Mutation:
    kind: str
    at: float  # position as a fraction of the length, so a mutation fits any file
    size: int  # bytes inserted, copied or overwritten (1 to MAX_CHUNK)
    value: int  # a 32-bit parameter: bit to flip, value to write, seed for bytes


def variant_format(variant: str) -> str:
    """The accepted format a seed variant belongs to (one of FORMATS)."""
    return variant.split("-")[0]


# Muxer options that cut the seeds into many small pages and clusters (and an m4a with its
# index first), so truncations and mutations leave something to decode.
_SEED_OPTIONS: dict[str, dict[str, str]] = {
    "ogg": {"page_duration": "20000"},
    "webm": {"cluster_time_limit": "40", "cluster_size_limit": "512"},
}
_EXTRA_SEEDS = {
    "m4a-faststart": ("m4a", {"movflags": "+faststart"}),
    "mp4-video-faststart": ("mp4-video", {"movflags": "+faststart"}),
}


def build_seeds() -> dict[str, bytes]:
    """A quarter-second of a two-tone signal in every variant the service accepts."""
    rate = 22050
    t = np.arange(int(SEED_SECONDS * rate)) / rate
    signal = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 3100 * t)
    pcm = Pcm(samples=(signal * 32767).astype(np.int16), sample_rate=rate)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "seed"  # the mp4 muxer rewrites its file to move the index
        seeds = {v: _encode(pcm, v, {}, path) for v in [*sc.FORMATS, *sc.OPENAI_FORMATS]}
        for name, (variant, options) in _EXTRA_SEEDS.items():
            seeds[name] = _encode(pcm, variant, options, path)
    return dict(sorted(seeds.items()))


def _encode(pcm: Pcm, variant: str, extra: dict[str, str], path: Path) -> bytes:
    demuxer = {**sc.FORMATS, **sc.OPENAI_FORMATS}[variant][0]
    options = {**_SEED_OPTIONS.get(demuxer, {}), **extra}
    return sc.write_audio(path, pcm, variant, muxer_options=options).read_bytes()


def mutate(data: bytes, mutations: list[Mutation]) -> bytes:
    for mutation in mutations:
        data = apply(data, mutation)
    return data


def apply(data: bytes, m: Mutation) -> bytes:
    pos = int(m.at * len(data))
    if m.kind == "flip":
        return _flip(data, pos, m.value)
    if m.kind == "truncate":
        return data[:pos]
    if m.kind == "insert":
        return data[:pos] + random.Random(m.value).randbytes(m.size) + data[pos:]
    if m.kind == "header":
        return _overwrite(data, int(m.at * min(len(data), HEADER_SPAN)), m.size, m.value)
    if m.kind == "field":
        return _overwrite(data, pos, m.size, m.value)
    if m.kind == "duplicate":
        chunk = data[pos : pos + m.size]
        to = (m.value % (len(data) + 1)) if data else 0
        return data[:to] + chunk + data[to:]
    if m.kind == "checksum":
        return _ogg_checksums(data)
    raise ValueError(f"unknown mutation {m.kind!r}")


def _flip(data: bytes, pos: int, value: int) -> bytes:
    if pos >= len(data):
        return data
    flipped = data[pos] ^ (1 << (value % 8)) if value & 0x100 else data[pos] ^ (value & 0xFF or 1)
    return data[:pos] + bytes([flipped]) + data[pos + 1 :]


def _overwrite(data: bytes, pos: int, size: int, value: int) -> bytes:
    """Write an integer field of 1, 2 or 4 bytes, either byte order, at `pos`."""
    width = (1, 2, 4)[size % 3]
    number = INTERESTING[value % len(INTERESTING)] if value & 0x10000 else value >> 17
    order = "<" if size & 4 else ">"
    code = {1: "B", 2: "H", 4: "I"}[width]
    field = struct.pack(order + code, number & ((1 << (8 * width)) - 1))
    return data[:pos] + field + data[pos + width :]


def _ogg_checksums(data: bytes) -> bytes:
    """`data` with the CRC of every complete Ogg page found in it set right."""
    out = bytearray(data)
    pos = out.find(b"OggS")
    while pos >= 0 and pos + 27 <= len(out):
        segments = out[pos + 26]
        body = sum(out[pos + 27 : pos + 27 + segments])
        end = pos + 27 + segments + body
        if end > len(out):
            break
        out[pos + 22 : pos + 26] = bytes(4)
        out[pos + 22 : pos + 26] = struct.pack("<I", _ogg_crc(bytes(out[pos:end])))
        pos = out.find(b"OggS", end)
    return bytes(out)


def _ogg_crc(page: bytes) -> int:
    # CRC-32 with polynomial 0x04C11DB7, unreflected, zero initial value (Ogg's own).
    crc = 0
    for byte in page:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
            crc &= 0xFFFFFFFF
    return crc


def random_mutation(rng: random.Random) -> Mutation:
    return Mutation(
        kind=rng.choice(KINDS),
        at=rng.random(),
        size=rng.randint(1, MAX_CHUNK),
        value=rng.getrandbits(32),
    )


def random_case(seeds: dict[str, bytes], seed: int, index: int) -> tuple[str, bytes]:
    """Case `index` of the run seeded `seed`: the same bytes on every machine and run."""
    rng = random.Random(f"{seed}:{index}")
    # Format first, then one of its variants, so each format gets a fifth of the cases.
    fmt = rng.choice(FORMATS)
    variant = rng.choice(sorted(v for v in seeds if variant_format(v) == fmt))
    mutations = [random_mutation(rng) for _ in range(rng.randint(1, 4))]
    if variant.startswith("ogg") and rng.random() < 0.75:
        mutations.append(Mutation("checksum", 0.0, 1, 0))
    return variant, mutate(seeds[variant], mutations)


def run_case(data: bytes, folder: Path) -> str:
    """The outcome of one upload: "decoded", a refusal's name, or a finding's description.

    Findings: any other exception, a refusal that only the last-line catch produced (a
    root cause to fix), or decoded audio that breaks the decoder's promises.
    """
    with tempfile.NamedTemporaryFile(dir=folder, prefix="case-") as file:
        file.write(data)
        file.flush()
        with _surprises() as logged:
            outcome = _outcome(Path(file.name))
    if logged:
        return f"fallback:{logged[0]}"
    return outcome


def _outcome(path: Path) -> str:
    try:
        fmt = identify_audio(path, OPENAI_AUDIO)
        if (finding := _measuring_finding(path, fmt)) is not None:
            return finding
        audio = decode_audio(path, max_seconds=MAX_SECONDS, fmt=fmt)
    except REFUSALS as exc:
        return type(exc).__name__
    except Exception as exc:
        return f"error:{type(exc).__name__}:{exc}"
    if audio.samples.dtype != np.float32 or not np.isfinite(audio.samples).all():
        return "invalid:samples not finite float32"
    if len(audio.samples) and np.abs(audio.samples).max() > 1.0:
        return "invalid:samples outside [-1, 1]"
    if not 0 < audio.duration_seconds <= MAX_SECONDS:
        return f"invalid:duration {audio.duration_seconds}"
    return "decoded"


def _measuring_finding(path: Path, fmt: UploadFormat) -> str | None:
    """What measuring the file as a job's upload raised other than a refusal, if anything:
    it reads the container's stated duration and packed frames, which decoding does not."""
    try:
        for _ in measuring(path, max_seconds=MAX_SECONDS, fmt=fmt):
            pass
    except REFUSALS:
        return None
    except Exception as exc:
        return f"error:measuring:{type(exc).__name__}:{exc}"
    return None


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        self.found.append(f"{type(exc).__name__}:{exc}" if exc else record.getMessage())


@contextmanager
def _surprises() -> Iterator[list[str]]:
    """Warnings the audio package logs: its last-line catch of unexpected exceptions."""
    handler = _Collect()
    logger = logging.getLogger("voice_service.audio")
    logger.addHandler(handler)
    try:
        yield handler.found
    finally:
        logger.removeHandler(handler)
