"""A sample's timbre frame by frame, lent to its clone's speech within each phone.

The profile's long-term envelope moves a base voice's average toward the person's; what each
sound of theirs looks like is left out. So a clone also keeps its sample's voiced frames (their
spectral envelopes as mel-cepstra, at 10 ms, with their phone class, `phones`), and each
voiced frame its base speaks takes the mean envelope of the `NEIGHBOURS` nearest sample frames
of the same phone, at its own loudness, blended with its converted one by `BLEND`
(docs/performance.md, "A clone borrows its sample's frames, phone by phone"; chosen on the
development half). F0 and aperiodicity stay the conversion's. Only within the sample's band
(below 8 kHz, the analysis rate's limit, or below where a telephone's or a codec's cut
leaves nothing): a clone of a phone call should sound like the person, not like the line.

Stored with the profile as text (`Timbre.to_text`): cepstra quantized to a byte each, per
coefficient between its own bounds, at most `MAX_FRAMES` frames.
"""

from __future__ import annotations

import base64
import binascii
import warnings
import zlib
from dataclasses import dataclass
from typing import Final

import numpy as np

from voice_service.engines.world.analysis import ANALYSIS_RATE
from voice_service.engines.world.pcm import Floats
from voice_service.engines.world.phones import PHONES, Labels, at_frames

with warnings.catch_warnings():
    # pyworld 0.3.5 imports pkg_resources only for its version string.
    warnings.simplefilter("ignore")
    import pyworld

FFT_SIZE: Final = 1024  # CheapTrick's at the analysis rate
ORDER: Final = 32  # cepstral coefficients kept, c0 included
FEATURES: Final = slice(1, 25)  # what frames are matched by (level, c0, left out)
FRAME_MS: Final = 10.0
MAX_FRAMES: Final = 2_000
NEIGHBOURS: Final = 4
BLEND: Final = 0.5
# The sample's band ends where its voiced frames' mean envelope first falls this far below
# its level over 300-3000 Hz (above 3 kHz): past a telephone's cut it falls much further,
# while a wideband recording's own roll-off stays above it (docs/performance.md).
BAND_FLOOR_DB: Final = 45.0
TAPER: Final = 0.2  # the lending fades out over the band's top fifth
_BLOCK: Final = 32  # frames matched at once
_FORMAT: Final = 1
_HEADER: Final = 16  # format, frames, order, band (Hz): four little-endian u32


@dataclass(frozen=True, slots=True)
class Timbre:
    """Voiced frames of a sample: their phone classes and mel-cepstra (16 kHz, `ORDER`)."""

    phones: Labels
    cepstra: Floats  # frames x ORDER
    band_hz: float  # where the sample's speech ends (`BAND_FLOOR_DB`)

    def to_text(self) -> str:
        low, high = self.cepstra.min(axis=0), self.cepstra.max(axis=0)
        scale = np.maximum(high - low, 1e-9)
        quantized = np.round((self.cepstra - low) / scale * 255.0).astype(np.uint8)
        header = np.array([_FORMAT, self.phones.size, ORDER, round(self.band_hz)], dtype="<u4")
        body = b"".join(
            (
                header.tobytes(),
                low.astype("<f4").tobytes(),
                scale.astype("<f4").tobytes(),
                self.phones.astype(np.uint8).tobytes(),
                quantized.tobytes(),
            )
        )
        return base64.b64encode(zlib.compress(body, 9)).decode("ascii")

    @classmethod
    def from_text(cls, text: str) -> Timbre:
        try:
            body = zlib.decompress(base64.b64decode(text, validate=True))
        except (binascii.Error, zlib.error) as error:
            raise ValueError(f"damaged timbre: {error}") from None
        if len(body) < _HEADER:
            raise ValueError("damaged timbre")
        version, frames, order, band = (int(value) for value in np.frombuffer(body, "<u4", 4))
        if version != _FORMAT or order != ORDER or not 0 < frames <= MAX_FRAMES:
            raise ValueError("unsupported timbre")
        at = _HEADER + 8 * order
        if len(body) != at + frames * (1 + order) or not 0 < band <= ANALYSIS_RATE // 2:
            raise ValueError("damaged timbre")
        low = np.frombuffer(body, "<f4", order, _HEADER)
        scale = np.frombuffer(body, "<f4", order, _HEADER + 4 * order)
        phones = np.frombuffer(body, np.uint8, frames, at).copy()
        quantized = np.frombuffer(body, np.uint8, frames * order, at + frames)
        if phones.max() >= len(PHONES):
            raise ValueError("damaged timbre")
        cepstra = quantized.reshape(frames, order) / 255.0 * scale + low
        return cls(phones, np.asarray(cepstra, dtype=np.float64), float(band))


def measure_timbre(f0: Floats, envelope: Floats, labels: Labels, frame_ms: float) -> Timbre:
    """The voiced frames of a 16 kHz sample's WORLD analysis (`f0`, `envelope` every
    `frame_ms`), `labels` its phones, taken every `FRAME_MS`."""
    step = max(1, round(FRAME_MS / frame_ms))
    frames = np.arange(0, f0.size, step)
    frames = frames[f0[frames] > 0][:MAX_FRAMES]
    phones = at_frames(labels, f0.size, frame_ms)[frames]
    cepstra = pyworld.code_spectral_envelope(
        np.ascontiguousarray(envelope[frames]), ANALYSIS_RATE, ORDER
    )
    return Timbre(phones, np.asarray(cepstra, dtype=np.float64), _band_hz(envelope[f0 > 0]))


def _band_hz(envelope: Floats) -> float:
    """Where the speech in `envelope` (16 kHz, voiced frames) ends (`BAND_FLOOR_DB`)."""
    level = 10.0 * np.log10(envelope + 1e-16).mean(axis=0)
    frequencies = np.linspace(0.0, ANALYSIS_RATE / 2.0, level.size)
    floor = level[(frequencies >= 300.0) & (frequencies <= 3_000.0)].mean() - BAND_FLOOR_DB
    below = np.flatnonzero((frequencies > 3_000.0) & (level < floor))
    return float(frequencies[below[0]]) if below.size else ANALYSIS_RATE / 2.0


def lent(
    envelope: Floats, f0: Floats, labels: Labels, rate: int, frame_ms: float, timbre: Timbre
) -> Floats:
    """`envelope` (converted speech at `rate`, one row per `frame_ms`, `labels` its phones)
    with each voiced frame moved toward the sample's frames of its phone, within the
    sample's band."""
    voiced = np.flatnonzero(f0 > 0)
    if voiced.size == 0 or timbre.phones.size < NEIGHBOURS:
        return envelope
    log_envelope = np.log(envelope + 1e-16)
    bins = np.linspace(0.0, rate / 2.0, envelope.shape[1])
    grid = np.linspace(0.0, ANALYSIS_RATE / 2.0, FFT_SIZE // 2 + 1)
    own = np.stack([np.interp(grid, bins, row) for row in log_envelope[voiced]])
    own_cepstra = pyworld.code_spectral_envelope(np.exp(own), ANALYSIS_RATE, ORDER)
    phones = at_frames(labels, f0.size, frame_ms)[voiced]
    borrowed = np.log(
        pyworld.decode_spectral_envelope(
            np.ascontiguousarray(_nearest(own_cepstra, phones, timbre)), ANALYSIS_RATE, FFT_SIZE
        )
        + 1e-16
    )
    band = grid <= timbre.band_hz
    # Its own loudness, over the band lent.
    borrowed += (own[:, band].mean(axis=1) - borrowed[:, band].mean(axis=1))[:, None]
    borrowed[1:-1] = (borrowed[:-2] + borrowed[1:-1] + borrowed[2:]) / 3.0
    weight = BLEND * np.clip((timbre.band_hz - grid) / (TAPER * timbre.band_hz), 0.0, 1.0)
    change = weight * (borrowed - own)
    moved = log_envelope.copy()
    for row, frame in enumerate(voiced):
        moved[frame] += np.interp(bins, grid, change[row], right=0.0)
    return np.ascontiguousarray(np.exp(moved), dtype=np.float64)


def _nearest(cepstra: Floats, phones: Labels, timbre: Timbre) -> Floats:
    """For each frame, the mean cepstrum of its `NEIGHBOURS` nearest sample frames of the
    same phone (of all the sample's frames where it has too few), by normalised features."""
    own = _normalised(cepstra[:, FEATURES])
    theirs = _normalised(timbre.cepstra[:, FEATURES])
    found = np.empty_like(cepstra)
    everyone = np.arange(timbre.phones.size)
    for phone in np.unique(phones):
        rows = np.flatnonzero(phones == phone)
        candidates = np.flatnonzero(timbre.phones == phone)
        if candidates.size < NEIGHBOURS:
            candidates = everyone
        # A block of frames at a time: frames x candidates x features stays a few MB.
        for block in np.array_split(rows, -(-rows.size // _BLOCK)):
            distances = ((own[block, None, :] - theirs[None, candidates, :]) ** 2).sum(axis=2)
            nearest = np.argpartition(distances, NEIGHBOURS - 1, axis=1)[:, :NEIGHBOURS]
            found[block] = timbre.cepstra[candidates[nearest]].mean(axis=1)
    return found


def _normalised(features: Floats) -> Floats:
    """Each coefficient centred and scaled over the frames: speakers compared by shape."""
    centred = features - features.mean(axis=0)
    return np.asarray(centred / (centred.std(axis=0) + 1e-6), dtype=np.float64)
