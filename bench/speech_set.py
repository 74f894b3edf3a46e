"""The transcription quality set: speech that no one here made with the service's own voices.

Two parts, each clip 16 kHz mono float32 with its reference text and language:

- Real recordings from Debian's `pocketsphinx-testdata` (`.ci/run` installs it): five
  LibriVox sentences read by one speaker, five spoken playing-card phrases by another, and
  short commands and digit strings by a third (the two judges of bench.clone_similarity
  agree these are one person). These are the only clips of real voices,
  with room noise and 2016 microphones; the files that ship without a transcription
  (numbers.raw, something.raw) are left out, since a reference made by ear or by a model
  would not be independent.
- Synthetic speech of `bench.sentences.SENTENCES` (three sentences per language): eSpeak in
  en es fr it pt de, and Kokoro's `jm_kumo` in es fr it pt. eSpeak is hard to understand on
  purpose here: it is far from the voices Whisper was trained on.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.audio import to_16k
from bench.recordings import POCKETSPHINX_DATA, present, read_recording
from bench.sentences import SENTENCES
from bench.wer import word_errors, words
from voice_service.engines.kokoro import KokoroEngine
from voice_service.engines.protocols import Pcm

ESPEAK_LANGUAGES = ("en", "es", "fr", "it", "pt", "de")
KOKORO_LANGUAGES = ("es", "fr", "it", "pt")
KOKORO_STYLE = "jm_kumo"

# Headerless recordings, 16 kHz 16-bit mono little-endian, with the words pocketsphinx's own
# tests expect from them.
_RAW_RECORDINGS = (
    ("goforward.raw", "go forward ten meters"),
    ("tidigits/dhd.2934z.raw", "two nine three four zero"),
)


# Whisper writes numbers as digits ("10 of clubs", "20 minutos") and "Mr." for "mister";
# the references spell them out, so transcripts are spelled out alike before scoring. The
# numbers the set says: 0 to 10 and 20; a longer digit string is read digit by digit
# ("29340": "two nine three four zero", as the TIDIGITS speaker said it).
_NUMBER_WORDS = {
    "en": "zero one two three four five six seven eight nine ten twenty",
    "es": "cero uno dos tres cuatro cinco seis siete ocho nueve diez veinte",
    "fr": "zero un deux trois quatre cinq six sept huit neuf dix vingt",
    "it": "zero uno due tre quattro cinque sei sette otto nove dieci venti",
    "pt": "zero um dois tres quatro cinco seis sete oito nove dez vinte",
    "de": "null eins zwei drei vier funf sechs sieben acht neun zehn zwanzig",
}
_ABBREVIATIONS = {"en": {"mr": "mister", "mrs": "missus", "dr": "doctor"}}


@dataclass(frozen=True, slots=True)
class Clip:
    name: str  # "librivox/…-0870", "espeak:de/1", "kokoro:jm_kumo:fr/2"
    source: str  # "real", "espeak" or "kokoro"
    language: str  # ISO 639-1
    text: str  # what is said
    audio: npt.NDArray[np.float32]  # 16 kHz mono

    def errors(self, transcript: str) -> tuple[int, int]:
        """(word edits, reference words) of `transcript`, its numbers spelled out."""
        return word_errors(self.text, spelled_out(transcript, self.language))


def spelled_out(text: str, language: str) -> str:
    """`text` in `bench.wer.words`, numbers and abbreviations written as the set's references
    write them."""
    names = _NUMBER_WORDS.get(language, "").split()
    numbers = {str(value): name for value, name in enumerate(names[:11])}
    if names:
        numbers["20"] = names[11]
    abbreviations = _ABBREVIATIONS.get(language, {})
    out: list[str] = []
    for word in words(text):
        if word in numbers:
            out.append(numbers[word])
        elif word.isdigit() and all(digit in numbers for digit in word):
            out.extend(numbers[digit] for digit in word)
        else:
            out.append(abbreviations.get(word, word))
    return " ".join(out)


def real_clips(root: Path = POCKETSPHINX_DATA) -> list[Clip]:
    """The recordings of `pocketsphinx-testdata`, English, three speakers."""
    listed = [
        (f"{folder}/{name}.wav", text)
        for folder, listing in (("librivox", "transcription"), ("cards", "cards.transcription"))
        for name, text in _transcription(present(root / folder / listing))
    ]
    return [
        Clip(path.removesuffix(".wav"), "real", "en", text, read_recording(path, root))
        for path, text in [*listed, *_RAW_RECORDINGS]
    ]


def synthetic_clips(data_dir: Path) -> list[Clip]:
    """eSpeak and Kokoro speaking the bench sentences; `data_dir` holds Kokoro's model."""
    clips = []
    for key, language, index, pcm in _espeak_speech():
        clips.append(Clip(f"{key}/{index}", "espeak", language, SENTENCES[language][index], pcm))
    kokoro = KokoroEngine(data_dir)
    for language in KOKORO_LANGUAGES:
        key = f"kokoro:{KOKORO_STYLE}:{language}"
        for index, text in enumerate(SENTENCES[language]):
            audio = to_16k(kokoro.synthesize(key, text))
            clips.append(Clip(f"{key}/{index}", "kokoro", language, text, audio))
    return clips


def speech_set(data_dir: Path) -> list[Clip]:
    return real_clips() + synthetic_clips(data_dir)


def _transcription(path: Path) -> Iterator[tuple[str, str]]:
    """Lines `<s> words </s> (file id)` as (file id, words)."""
    for line in path.read_text().splitlines():
        words, _, name = line.rpartition("(")
        text = words.replace("<s>", "").replace("</s>", "").strip()
        if text:
            yield name.rstrip(") "), " ".join(text.split())


# Reads "voice key<TAB>text" lines; writes each clip as rate, sample count, int16 samples.
_FRESH_ESPEAK = """
import sys
from voice_service.engines.espeak import EspeakEngine
engine = EspeakEngine()
for line in sys.stdin.read().splitlines():
    key, text = line.split("\\t")
    pcm = engine.synthesize(key, text)
    head = pcm.sample_rate.to_bytes(4, "little") + pcm.samples.size.to_bytes(4, "little")
    sys.stdout.buffer.write(head + pcm.samples.astype("<i2").tobytes())
"""


def _espeak_speech() -> Iterator[tuple[str, str, int, npt.NDArray[np.float32]]]:
    """All eSpeak clips, made by a new process: espeak-ng's pitch flutter runs on from call
    to call within a process, so only a fresh library speaks the same clips every run."""
    order = [
        (f"espeak:{language}", language, index, text)
        for language in ESPEAK_LANGUAGES
        for index, text in enumerate(SENTENCES[language])
    ]
    done = subprocess.run(  # our own interpreter, fixed code
        [sys.executable, "-c", _FRESH_ESPEAK],
        input="".join(f"{key}\t{text}\n" for key, _, _, text in order).encode(),
        capture_output=True,
        check=True,
    )
    out, at = done.stdout, 0
    for key, language, index, _text in order:
        rate = int.from_bytes(out[at : at + 4], "little")
        count = int.from_bytes(out[at + 4 : at + 8], "little")
        samples = np.frombuffer(out, dtype="<i2", count=count, offset=at + 8)
        at += 8 + 2 * count
        yield key, language, index, to_16k(Pcm(samples.astype(np.int16), rate))
