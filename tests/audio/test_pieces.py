"""Long audio cut at pauses (audio/pieces.py), on real recordings: the same pieces however
the audio arrives, every sample in exactly one piece, none longer than allowed, and the
cuts in the pauses between speakers."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from tests.helpers.jobs import conversation, recordings
from voice_service.audio.pieces import Piece, PieceCutter
from voice_service.audio.vad import RATE


def cut(audio: npt.NDArray[np.float32], sizes: list[int]) -> list[Piece]:
    cutter = PieceCutter()
    pieces: list[Piece] = []
    at = 0
    for size in sizes:
        pieces += cutter.add(audio[at : at + size])
        at += size
    return [*pieces, *cutter.finish()]


def chunk_sizes(total: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    sizes = []
    while sum(sizes) < total:
        sizes.append(int(rng.integers(1, 40_000)))
    return sizes


@pytest.fixture(scope="module")
def audio() -> npt.NDArray[np.float32]:
    return conversation(rounds=2)


def test_the_pieces_are_the_same_however_the_audio_arrives(
    audio: npt.NDArray[np.float32],
) -> None:
    whole = cut(audio, [audio.size])
    for sizes in ([4000] * (audio.size // 4000 + 1), chunk_sizes(audio.size, 7)):
        pieces = cut(audio, sizes)
        assert [(p.start, p.samples.size, p.speech) for p in pieces] == [
            (p.start, p.samples.size, p.speech) for p in whole
        ]


def test_every_sample_is_in_one_piece_and_no_piece_is_too_long(
    audio: npt.NDArray[np.float32],
) -> None:
    pieces = cut(audio, [audio.size])
    assert np.array_equal(np.concatenate([p.samples for p in pieces]), audio)
    assert [p.start for p in pieces] == [0, *(p.end for p in pieces[:-1])]
    assert all(p.samples.size <= 30 * RATE for p in pieces)
    # Each piece holds speech, but the silence the audio ends with.
    assert [p.speech for p in pieces] == [True] * (len(pieces) - 1) + [False]


def test_every_cut_is_in_silence(audio: npt.NDArray[np.float32]) -> None:
    pieces = cut(audio, [audio.size])
    assert len(pieces) > 6
    for piece in pieces[:-1]:
        around = audio[piece.end - RATE // 5 : piece.end + RATE // 5]  # 0.2 s each side
        loudness = float(np.sqrt(np.mean(around**2)))
        assert loudness < 0.005, (piece.end / RATE, loudness)  # speech here: about 0.05


def test_silence_is_cut_at_the_longest_and_marked_as_no_speech() -> None:
    speech = recordings()[0]
    silence = np.zeros(95 * RATE, dtype=np.float32)
    audio = np.concatenate([speech, silence, speech])
    pieces = cut(audio, [audio.size])
    assert pieces[0].speech and pieces[-1].speech
    quiet = [p for p in pieces if not p.speech]
    assert len(quiet) >= 2
    assert all(p.samples.size == 30 * RATE for p in quiet[:-1])
