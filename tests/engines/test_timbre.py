"""A clone borrows its sample's frames phone by phone: the phone loop, the stored timbre, and
what lending it does to a clone of a real person (pocketsphinx-testdata's LibriVox reader)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from bench.diarization_set import voice_clips
from bench.people import Person, people
from bench.resemblance import TEXTS

from tests.helpers.speakers import READER
from tests.helpers.speech_clips import ENGLISH_TEXTS, english_speech
from voice_service.engines.protocols import Pcm
from voice_service.engines.speaker_embedding import SpeakerEncoder
from voice_service.engines.world import WorldCloner
from voice_service.engines.world.analysis import FRAME_PERIOD_MS, sample_world
from voice_service.engines.world.conversion import analyse_base_speech
from voice_service.engines.world.pcm import Floats, resample, to_float
from voice_service.engines.world.phones import PHONES, SILENCE, labels
from voice_service.engines.world.timbre import MAX_FRAMES, ORDER, Timbre, lent, measure_timbre
from voice_service.inference.engines import Engines

RATE = 16_000


@pytest.fixture(scope="module")
def reader() -> Floats:
    return np.concatenate(voice_clips(READER)[:3]).astype(np.float64)


@pytest.fixture(scope="module")
def timbre(reader: Floats) -> Timbre:
    world = sample_world(reader)
    return measure_timbre(world.f0, world.envelope, labels(reader), FRAME_PERIOD_MS)


def test_speech_is_heard_as_phones_and_silence_as_silence(reader: Floats) -> None:
    quiet = np.zeros(RATE, dtype=np.float64)

    heard = labels(np.concatenate([quiet, reader]))

    assert heard.size == (RATE + reader.size) // 160 + 1
    assert np.all(heard[10:90] == SILENCE)  # the second of silence, but its edges
    spoken = heard[100:]
    assert np.mean(spoken != SILENCE) > 0.6
    assert len(np.unique(spoken)) > 25  # most of English's 39 phones in three sentences


def test_the_phones_do_not_depend_on_what_was_heard_before(reader: Floats) -> None:
    first = labels(reader[: 5 * RATE])
    labels(_person("Allison (Asterisk)").sample.astype(np.float64))

    np.testing.assert_array_equal(labels(reader[: 5 * RATE]), first)


def test_threads_hear_the_same_phones(reader: Floats) -> None:
    alone = labels(reader)
    heard: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: heard.append(labels(reader))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(heard) == 3
    for each in heard:
        np.testing.assert_array_equal(each, alone)


def test_a_timbre_is_the_sample_s_voiced_frames(timbre: Timbre, reader: Floats) -> None:
    assert timbre.cepstra.shape == (timbre.phones.size, ORDER)
    # Every 10 ms that harvest calls voiced: most of a reading.
    assert 0.3 * reader.size / 160 < timbre.phones.size <= reader.size / 160
    assert np.mean(timbre.phones != SILENCE) > 0.8
    assert timbre.phones.max() < len(PHONES)


def test_a_timbre_survives_its_text_within_a_byte_s_precision(timbre: Timbre) -> None:
    text = timbre.to_text()
    back = Timbre.from_text(text)

    np.testing.assert_array_equal(back.phones, timbre.phones)
    step = (timbre.cepstra.max(axis=0) - timbre.cepstra.min(axis=0)) / 255.0
    assert np.all(np.abs(back.cepstra - timbre.cepstra) <= step / 2 + 1e-6)
    # What a profile grows by: a byte per coefficient and frame, as base64.
    assert len(text) < 1.4 * timbre.phones.size * (1 + ORDER)


@pytest.mark.parametrize(
    "damage",
    [lambda text: text[:-8], lambda text: "not base64!", lambda text: text[:20] + "A" + text[21:]],
)
def test_a_damaged_timbre_is_refused(timbre: Timbre, damage: object) -> None:
    assert callable(damage)
    with pytest.raises(ValueError, match="timbre"):
        Timbre.from_text(damage(timbre.to_text()))


def test_a_long_sample_keeps_at_most_max_frames(reader: Floats) -> None:
    long = np.tile(reader, 8)[: 60 * RATE]
    world = sample_world(long)

    kept = measure_timbre(world.f0, world.envelope, labels(long), FRAME_PERIOD_MS)

    assert kept.phones.size == MAX_FRAMES
    assert len(kept.to_text()) < 1.4 * MAX_FRAMES * (1 + ORDER)  # about 90 KB at most


def _person(name: str) -> Person:
    return next(person for person in people() if person.name == name)


def test_lending_the_timbre_brings_a_clone_nearer_its_person(engines: Engines) -> None:
    """By the node's own encoder, the clone's speech against the person's reference (a
    recording the sample does not hold), with and without its timbre."""
    cloner = engines.cloner
    assert isinstance(cloner, WorldCloner)
    person = _person("LibriVox reader")
    clone = cloner.clone(Pcm((np.clip(person.sample, -1, 1) * 32767).astype(np.int16), RATE))
    without = {key: value for key, value in clone.profile.items() if key != "timbre"}
    assert "timbre" in clone.profile

    encoder = SpeakerEncoder(intra_op_threads=1)
    reference = encoder.embed(person.reference)
    near = {}
    for name, profile in (("with", clone.profile), ("without", without)):
        speak = cloner.speaker(profile)
        said = [speak(text) for text in TEXTS]
        speech = np.concatenate([resample(to_float(pcm), pcm.sample_rate, RATE) for pcm in said])
        near[name] = float(encoder.embed(speech.astype(np.float32)) @ reference)

    assert near["with"] > near["without"], near


def test_a_wideband_sample_lends_up_to_8_khz(timbre: Timbre) -> None:
    assert timbre.band_hz >= 7_000


def test_a_telephone_sample_lends_nothing_above_its_band() -> None:
    """Asterisk's prompts are 8 kHz telephone recordings: a clone of one should sound like
    the person, not like the line."""
    allison = _person("Allison (Asterisk)").sample.astype(np.float64)
    world = sample_world(allison)
    line = measure_timbre(world.f0, world.envelope, labels(allison), FRAME_PERIOD_MS)
    assert 3_800 <= line.band_hz <= 5_000

    spoken = english_speech(ENGLISH_TEXTS[1])
    base = analyse_base_speech(spoken, (60.0, 300.0), labelled=True)
    assert base.labels is not None
    envelope = base.world.envelope

    moved = lent(envelope, base.world.f0, base.labels, spoken.sample_rate, FRAME_PERIOD_MS, line)

    bins = np.linspace(0.0, spoken.sample_rate / 2.0, envelope.shape[1])
    above, within = bins >= line.band_hz, bins <= 0.8 * line.band_hz
    np.testing.assert_allclose(moved[:, above], envelope[:, above], rtol=1e-9, atol=1e-15)
    voiced = base.world.f0 > 0
    assert np.abs(np.log(moved[voiced][:, within] / envelope[voiced][:, within])).mean() > 0.1
    np.testing.assert_allclose(moved[~voiced], envelope[~voiced], rtol=1e-9, atol=1e-15)
