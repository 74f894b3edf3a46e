"""WAV files written byte by byte, so a test can state every header field it relies on."""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

PCM = 1
IEEE_FLOAT = 3


def wav_bytes(
    data: bytes, *, rate: int, channels: int = 1, bits: int = 16, format_tag: int = PCM
) -> bytes:
    """A canonical RIFF/WAVE file: a 16-byte fmt chunk, then `data` as it is."""
    block_align = channels * bits // 8
    fmt = struct.pack("<HHIIHH", format_tag, channels, rate, rate * block_align, block_align, bits)
    return _chunk(b"RIFF", b"WAVE" + _chunk(b"fmt ", fmt) + _chunk(b"data", data))


def silent_wav(samples: int, rate: int) -> bytes:
    """`samples` frames of 16-bit mono silence at `rate`."""
    return wav_bytes(bytes(2 * samples), rate=rate)


def float_wav(values: npt.ArrayLike, rate: int = 16000) -> bytes:
    """32-bit IEEE float mono samples, written as they are (NaN and infinity included)."""
    data = np.asarray(values, dtype="<f4").tobytes()
    return wav_bytes(data, rate=rate, bits=32, format_tag=IEEE_FLOAT)


def zero_bit_wav(samples: int = 16000, rate: int = 16000) -> bytes:
    """A PCM WAV whose header says 0 bits per sample: FFmpeg finds no decoder for it."""
    return wav_bytes(bytes(2 * samples), rate=rate, bits=0)


def _chunk(tag: bytes, body: bytes) -> bytes:
    pad = b"\x00" if len(body) % 2 else b""  # RIFF chunks are word-aligned
    return tag + struct.pack("<I", len(body)) + body + pad
