"""Real people's recordings, for judging whether a clone sounds like its person: ten people
in six languages, each with a sample to clone from, a reference clip the judges compare
with, and clips of their own for calibrating the judges. No voice here is synthetic.

- Debian's `pocketsphinx-testdata` (16 kHz): the LibriVox reader, the playing-card caller
  and the speaker of the commands and digit strings (figure 7's three).
- Asterisk's prompts (8 kHz telephone recordings): `asterisk-core-sounds-{en,fr,it,ru}-wav`
  (Allison in US English, June in Canadian French, Carlo in Italian, the Russian IVR voice),
  `asterisk-prompt-it-menardi-wav` (Menardi, Italian), `asterisk-prompt-fr-armelle`
  (Armelle, French) and `asterisk-prompt-es-co` (Colombian Spanish). The Mexican Spanish
  prompts are left out: their speaker is named Allison too, and may be her.

The people were split in two halves before any clone was measured on them: the development
half, which a choice inside the product may be tuned on, and the held-out half, whose figures
are reported and never used for a choice. Each person's prompts are taken in the order of
their file names (those of 2.5 s or more): the first make the sample (20 s or more), the
next the reference (10 s or more), the next eight the calibration clips.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from bench.recordings import SpeechDataMissingError, read_recording
from voice_service.audio.decode import UndecodableAudio, decode_audio

Half = Literal["development", "held-out"]
Audio = npt.NDArray[np.float32]  # mono, 16 kHz

ASTERISK = Path("/usr/share/asterisk/sounds")
PACKAGES = (
    "pocketsphinx-testdata asterisk-core-sounds-en-wav asterisk-core-sounds-fr-wav "
    "asterisk-core-sounds-it-wav asterisk-core-sounds-ru-wav asterisk-prompt-it-menardi-wav "
    "asterisk-prompt-fr-armelle asterisk-prompt-es-co"
)
SAMPLE_SECONDS = 20.0
REFERENCE_SECONDS = 10.0
CALIBRATION_CLIPS = 8
MIN_PROMPT_SECONDS = 2.5
_LIBRIVOX = "librivox/sense_and_sensibility_01_austen_64kb-{}.wav"


@dataclass(frozen=True)
class Person:
    name: str
    language: str  # BCP 47
    half: Half
    sample: Audio  # what the clone is made from
    reference: Audio  # what the clone is compared with
    clips: tuple[Audio, ...]  # the person's own, for calibrating the judges


@dataclass(frozen=True)
class _Recorded:
    """Where a person's recordings are: pocketsphinx files by name, or a prompt folder."""

    name: str
    language: str
    half: Half
    folder: str = ""  # under ASTERISK
    sample: tuple[str, ...] = ()  # pocketsphinx-testdata files
    reference: tuple[str, ...] = ()
    clips: tuple[str, ...] = ()


_PEOPLE = (
    _Recorded(
        "LibriVox reader",
        "en",
        "development",
        sample=tuple(_LIBRIVOX.format(n) for n in ("0870", "0890")),
        reference=tuple(_LIBRIVOX.format(n) for n in ("0880", "0920", "0930")),
        clips=tuple(_LIBRIVOX.format(n) for n in ("0870", "0880", "0890", "0920", "0930")),
    ),
    _Recorded(
        "card caller",
        "en",
        "development",
        sample=("cards/003.wav", "cards/004.wav", "cards/005.wav"),
        reference=("cards/001.wav", "cards/002.wav"),
        clips=tuple(f"cards/00{n}.wav" for n in range(1, 6)),
    ),
    _Recorded(
        "command speaker",
        "en",
        "held-out",
        sample=("numbers.raw", "something.raw"),
        reference=("goforward.raw", "tidigits/dhd.2934z.raw"),
        clips=("numbers.raw", "something.raw", "goforward.raw", "tidigits/dhd.2934z.raw"),
    ),
    _Recorded("Allison (Asterisk)", "en-US", "development", folder="en_US_f_Allison"),
    _Recorded("Carlo (Asterisk)", "it-IT", "development", folder="it_IT_m_Carlo"),
    _Recorded("Armelle (Asterisk)", "fr-FR", "development", folder="fr"),
    _Recorded("June (Asterisk)", "fr-CA", "held-out", folder="fr_CA_f_June"),
    _Recorded("Menardi (Asterisk)", "it-IT", "held-out", folder="it_IT_f_Menardi"),
    _Recorded("Russian IVR voice (Asterisk)", "ru-RU", "held-out", folder="ru_RU_f_IvrvoiceRU"),
    _Recorded("Colombian voice (Asterisk)", "es-CO", "held-out", folder="es"),
)


@cache
def people() -> tuple[Person, ...]:
    """Everyone, in a fixed order; raises `SpeechDataMissingError` naming the packages to
    install when a recording is missing."""
    return tuple(_person(recorded) for recorded in _PEOPLE)


def of_half(half: Half) -> list[Person]:
    return [person for person in people() if person.half == half]


def _person(recorded: _Recorded) -> Person:
    if not recorded.folder:
        return Person(
            recorded.name,
            recorded.language,
            recorded.half,
            _joined([read_recording(name) for name in recorded.sample]),
            _joined([read_recording(name) for name in recorded.reference]),
            tuple(read_recording(name) for name in recorded.clips),
        )
    prompts = iter(spoken_prompts(ASTERISK / recorded.folder))
    sample = _taken(prompts, SAMPLE_SECONDS)
    reference = _taken(prompts, REFERENCE_SECONDS)
    clips = tuple(itertools.islice(prompts, CALIBRATION_CLIPS))
    return Person(recorded.name, recorded.language, recorded.half, sample, reference, clips)


def spoken_prompts(folder: Path) -> list[Audio]:
    """The folder's spoken prompts of `MIN_PROMPT_SECONDS` or more, by file name (tones and
    beeps are shorter, or named so)."""
    if not folder.is_dir():
        raise SpeechDataMissingError(f"{folder} is missing: apt-get install {PACKAGES}")
    found = []
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".wav", ".gsm") or "tone" in path.name or "beep" in path.name:
            continue
        try:
            audio = decode_audio(path, max_seconds=600)
        except UndecodableAudio:  # a packaged prompt that holds no audio
            continue
        if audio.duration_seconds >= MIN_PROMPT_SECONDS:
            found.append(audio.samples)
    return found


def _taken(prompts: Iterator[Audio], seconds: float) -> Audio:
    """The next prompts, joined, until they last `seconds`."""
    taken: list[Audio] = []
    while sum(part.size for part in taken) < seconds * 16_000:
        taken.append(next(prompts))
    return _joined(taken)


def _joined(parts: Sequence[Audio]) -> Audio:
    pause = np.zeros(16_000 // 4, dtype=np.float32)
    return np.concatenate([piece for part in parts for piece in (part, pause)])[: -pause.size]
