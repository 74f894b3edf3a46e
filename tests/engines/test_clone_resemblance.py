"""A clone of a real person sounds more like that person than like anyone else, by the
node's own speaker encoder and by CAM++, a verifier the product never consults.

The people are `bench.people`'s (pocketsphinx-testdata's speakers and the Asterisk prompt
voices: `.ci/run` installs both); each clone is made from the person's sample and compared
with every person's reference clip, a different recording. Figure 20 in docs/performance.md
measures every person; these are two of the development half for whom it holds today, so
that a change that loses them is seen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from bench.people import Person, people
from bench.resemblance import TEXTS

from voice_service.engines.protocols import Pcm
from voice_service.engines.speaker_embedding import SpeakerEncoder
from voice_service.engines.speaker_model import SpeakerModel
from voice_service.engines.world import WorldCloner
from voice_service.engines.world.pcm import resample, to_float
from voice_service.inference.engines import Engines

RATE = 16_000


@pytest.fixture(scope="module")
def cloner(engines: Engines) -> WorldCloner:
    assert isinstance(engines.cloner, WorldCloner)
    return engines.cloner


def _speech_of(cloner: WorldCloner, person: Person) -> tuple[float, npt.NDArray[np.float32]]:
    clone = cloner.clone(Pcm((np.clip(person.sample, -1, 1) * 32767).astype(np.int16), RATE))
    speak = cloner.speaker(clone.profile)
    said = [speak(text) for text in TEXTS]
    speech = [resample(to_float(pcm), pcm.sample_rate, RATE) for pcm in said]
    return clone.resemblance, np.concatenate(speech).astype(np.float32)


@pytest.mark.parametrize("name", ["LibriVox reader", "Allison (Asterisk)"])
def test_a_clone_is_nearest_its_person_by_both_verifiers(
    cloner: WorldCloner, campp_file: Path, name: str
) -> None:
    everyone = people()
    person = next(person for person in everyone if person.name == name)
    resemblance, speech = _speech_of(cloner, person)
    assert 0 < resemblance <= 1

    own = SpeakerEncoder(intra_op_threads=1)
    independent = SpeakerModel(campp_file, intra_op_threads=1)
    for embed in (own.embed, independent.embed):
        heard = embed(speech)
        similarity = {other.name: float(heard @ embed(other.reference)) for other in everyone}
        assert max(similarity, key=similarity.__getitem__) == name, similarity
