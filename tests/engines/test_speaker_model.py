"""An operator's speaker model (VOICE_SERVICE_SPEAKER_MODEL): 3D-Speaker's CAM++ in
sherpa-onnx's layout tells real people apart (Debian's pocketsphinx-testdata) through our
filterbank, names the diarizer's segments and known speakers, and a file that is not such a
model is refused at load."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
import pytest
from bench.speech_set import real_clips

from tests.helpers.speakers import CALLER, COMMANDS, READER, reference, speaker_of, spoken
from voice_service.engines.diarization import (
    D_VECTORS,
    Diarizer,
    KnownSpeaker,
    SpeakerHints,
    VoiceModel,
)
from voice_service.engines.speaker_embedding import SAMPLE_RATE, SpeakerEncoder, model_path
from voice_service.engines.speaker_model import SpeakerModel, UnusableSpeakerModel

THREE = [(READER, 0), (CALLER, 4), (COMMANDS, 1), (READER, 2), (CALLER, 1), (COMMANDS, 0)]


@pytest.fixture(scope="module")
def model(campp_file: Path) -> SpeakerModel:
    return SpeakerModel(campp_file)


@pytest.fixture(scope="module")
def diarizer(model: SpeakerModel) -> Diarizer:
    return Diarizer(SpeakerEncoder(), voices=VoiceModel(model, 0.35, 0.65))


def test_each_clip_is_nearest_its_own_speakers_other_clips(model: SpeakerModel) -> None:
    clips = real_clips()
    vectors = np.stack([model.embed(clip.audio) for clip in clips])
    assert vectors.shape == (len(clips), model.dimensions)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    same, different = [], []
    for a, b in itertools.combinations(range(len(clips)), 2):
        (same if speaker_of(clips[a]) == speaker_of(clips[b]) else different).append(
            similarity[a, b]
        )
    assert min(same) > max(different), (sorted(same)[:3], sorted(different)[-3:])


def test_the_models_vectors_name_the_segments_and_the_people(
    diarizer: Diarizer, model: SpeakerModel
) -> None:
    samples, truth = spoken(THREE)
    voiced = diarizer.voiced(samples)
    assert {vector.shape for vector in voiced.vectors} == {(192,)}  # CAM++'s, not d-vectors

    known = (diarizer.known("Bob", reference(CALLER, 0, 2, 3)),)
    assert known[0].encoder == diarizer.encoder != D_VECTORS
    turns = diarizer.turns(samples, SpeakerHints(known=known))
    people: dict[int, str] = {}
    for turn in turns:
        middle = (turn.start + turn.end) / 2
        (person,) = {p for p, start, end in truth if start - 0.25 <= middle <= end + 0.25}
        assert people.setdefault(turn.speaker, person) == person
    assert sorted(people.values()) == sorted({READER, CALLER, COMMANDS})
    assert {turn.name for turn in turns} == {"Bob", None}
    assert all((turn.name == "Bob") == (people[turn.speaker] == CALLER) for turn in turns)

    # The model's own distances decide: past these bars, one person and no name.
    loose = Diarizer(SpeakerEncoder(), voices=VoiceModel(model, 1.5, 0.999))
    alike = loose.turns_of(voiced, samples.size / SAMPLE_RATE, SpeakerHints(known=known))
    assert {(turn.speaker, turn.name) for turn in alike} == {(0, None)}


def test_a_known_speakers_model_is_kept_with_its_vector() -> None:
    person = KnownSpeaker("Bob", np.ones(3, dtype=np.float32) / np.sqrt(3), "onnx:0123")
    (back,) = SpeakerHints.of(SpeakerHints(known=(person,)).given()).known
    assert back.encoder == "onnx:0123"
    # Kept before speaker models were: the d-vector encoder made it.
    old = {"known": [{"name": "Bob", "vector": [1.0, 0.0]}]}
    assert SpeakerHints.of(old).known[0].encoder == D_VECTORS


def test_the_same_speech_softer_has_the_same_vector(model: SpeakerModel) -> None:
    # CAM++'s metadata asks for each band's mean to be taken out: a gain is a constant in
    # every band of the log filterbank (but where the log's floor is reached), so it is gone.
    clip = real_clips()[0].audio
    assert float(model.embed(clip) @ model.embed(clip * 0.5)) > 0.999


def test_silence_and_a_few_samples_still_have_a_vector(model: SpeakerModel) -> None:
    for samples in (np.zeros(SAMPLE_RATE, dtype=np.float32), np.full(10, 0.1, dtype=np.float32)):
        vector = model.embed(samples)
        assert vector.shape == (192,) and np.isfinite(vector).all()


def test_a_file_that_is_not_such_a_model_is_refused(campp_file: Path, tmp_path: Path) -> None:
    with pytest.raises(UnusableSpeakerModel, match="no such file"):
        SpeakerModel(tmp_path / "missing.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(UnusableSpeakerModel, match="not an ONNX model"):
        SpeakerModel(garbage)
    with pytest.raises(UnusableSpeakerModel, match="sherpa-onnx's layout"):
        SpeakerModel(model_path())  # the d-vector encoder: 40 bands, no output_dim
    for key, value, problem in (
        ("sample_rate", "8000", "sample_rate '8000'"),
        ("output_dim", "many", "sherpa-onnx's layout"),
        ("feature_normalize_type", "per-utterance-cmvn", "feature_normalize_type"),
        ("output_dim", "256", "not output_dim"),
    ):
        graph = onnx.load(str(campp_file))
        (entry,) = [prop for prop in graph.metadata_props if prop.key == key]
        entry.value = value
        changed = tmp_path / f"{key}.onnx"
        onnx.save(graph, str(changed))
        with pytest.raises(UnusableSpeakerModel, match=problem):
            SpeakerModel(changed)
