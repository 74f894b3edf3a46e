"""How much a WORLD clone sounds like its sample: speaker similarity and intelligibility.

Run `python -m bench.clone_similarity [--quick]` (needs `pip install resemblyzer`, which is a
benchmark dependency only: it brings torch).

For each reference speaker we clone a voice from a reference sample (its own text), then
speak a fixed test text with the base voice and with the clone, and compare Resemblyzer
speaker embeddings: cosine(reference, base) against cosine(reference, clone). The clone's
gain is the difference. Intelligibility: Whisper (base model, English given) word error rate
of the clone's speech against the base voice's, on the same test texts.

References (all made offline, none from the clone's own code path):
- espeak-ng voice variants (female f2/f4, old male "grandpa", child-like "Annie"... see
  `ESPEAK_REFERENCES`): each variant sets its own pitch, formant frequencies and voice
  quality, so they are distinct speakers to a listener, with very different timbre from the
  neural base voice. They are synthetic, so absolute similarities stay low; the gain is what
  matters.
- Speed-perturbed base-voice speech (resampled like a tape played faster or slower, which
  moves pitch, formants and tempo together). Speaker-recognition training treats 0.9x/1.1x
  speed-perturbed copies as new speakers (Kaldi's VoxCeleb recipes); we use 0.85x and 1.2x.
  These are resampled, not WORLD-processed, so the clone cannot win by undoing its own trick.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice_service.engines.espeak import KEY_PREFIX as ESPEAK_PREFIX
from voice_service.engines.espeak import EspeakEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import EngineVoice, Pcm
from voice_service.engines.whisper import WhisperEngine
from voice_service.engines.world import WorldCloner, analyse_sample, convert

BASE_VOICE = "piper:en_US-joe-medium"

# What the reference speaker "uploads": about 12 s of read speech.
REFERENCE_TEXT = (
    "Every morning I walk along the river and watch the boats drift slowly past the old "
    "stone bridge. Would you like a cup of tea, or would you rather have some cold water? "
    "My neighbour's children were playing football in the garden until it began to rain."
)
# What the base voice and the clone say; different words from the reference.
TEST_TEXTS = (
    "Please send the quarterly report to the finance team before Friday afternoon.",
    "The weather today is sunny with a light breeze coming from the west.",
    "She opened the window, looked at the mountains, and decided to stay another week.",
)

# espeak-ng variant -> label. en-us as the language so the words are American like the base.
ESPEAK_REFERENCES = {
    "en-us+f2": "espeak female f2",
    "en-us+f4": "espeak female f4",
    "en-us+Annie": "espeak Annie",
    "en-us+grandpa": "espeak grandpa",
    "en-us+m3": "espeak male m3",
}
SPEED_REFERENCES = {0.85: "joe speed 0.85x", 1.2: "joe speed 1.2x"}
QUICK_REFERENCES = ("espeak female f2", "espeak grandpa", "joe speed 0.85x")

WHISPER_RATE = 16_000


@dataclass(frozen=True)
class Row:
    reference: str
    f0_hz: float
    formant_scale: float
    base_similarity: float
    clone_similarity: float

    @property
    def gain(self) -> float:
        return self.clone_similarity - self.base_similarity


def _speed_perturb(pcm: Pcm, factor: float) -> Pcm:
    """Play `pcm` `factor` times faster: resample by 1/factor, keep the nominal rate."""
    import librosa  # benchmark dependency (comes with resemblyzer)

    audio = pcm.samples.astype(np.float32) / 32768.0
    faster = librosa.resample(audio, orig_sr=pcm.sample_rate * factor, target_sr=pcm.sample_rate)
    return Pcm(np.round(faster * 32767.0).astype(np.int16), pcm.sample_rate)


def _concat(parts: Sequence[Pcm]) -> Pcm:
    pause = np.zeros(parts[0].sample_rate // 4, dtype=np.int16)
    joined = [piece for part in parts for piece in (part.samples, pause)]
    return Pcm(np.concatenate(joined), parts[0].sample_rate)


def _to_float(pcm: Pcm, rate: int) -> npt.NDArray[np.float32]:
    import librosa

    audio = pcm.samples.astype(np.float32) / 32768.0
    if pcm.sample_rate == rate:
        return audio
    return np.asarray(librosa.resample(audio, orig_sr=pcm.sample_rate, target_sr=rate))


class _Embedder:
    def __init__(self) -> None:
        from resemblyzer import VoiceEncoder, preprocess_wav

        self._encoder = VoiceEncoder("cpu", verbose=False)
        self._preprocess = preprocess_wav

    def embed(self, pcm: Pcm) -> npt.NDArray[np.float32]:
        wav = self._preprocess(pcm.samples.astype(np.float32) / 32768.0, pcm.sample_rate)
        return np.asarray(self._encoder.embed_utterance(wav), dtype=np.float32)


def _cosine(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split()


def word_error_rate(reference: str, hypothesis: str) -> tuple[int, int]:
    """(word edits, reference words) by Levenshtein distance over normalized words."""
    ref, hyp = _words(reference), _words(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, start=1):
        current = [i]
        for j, hyp_word in enumerate(hyp, start=1):
            substitution = previous[j - 1] + (ref_word != hyp_word)
            current.append(min(previous[j] + 1, current[j - 1] + 1, substitution))
        previous = current
    return previous[-1], len(ref)


def _references(piper: PiperEngine, quick: bool) -> list[tuple[str, Pcm]]:
    # Variants are distinct speakers; the service's catalogue lists plain languages only.
    variants = [EngineVoice(f"{ESPEAK_PREFIX}{name}", name, "en") for name in ESPEAK_REFERENCES]
    espeak = EspeakEngine(extra_voices=variants)
    references = [
        (label, espeak.synthesize(f"{ESPEAK_PREFIX}{variant}", REFERENCE_TEXT))
        for variant, label in ESPEAK_REFERENCES.items()
    ]
    joe = piper.synthesize(BASE_VOICE, REFERENCE_TEXT)
    references += [
        (label, _speed_perturb(joe, factor)) for factor, label in SPEED_REFERENCES.items()
    ]
    if quick:
        references = [item for item in references if item[0] in QUICK_REFERENCES]
    return references


def measure(quick: bool) -> dict[str, Any]:
    """Run the benchmark; `quick` uses 3 references and one test text."""
    piper = PiperEngine()
    cloner = WorldCloner(piper, BASE_VOICE)
    embedder = _Embedder()
    texts = TEST_TEXTS[:1] if quick else TEST_TEXTS
    base_speech = [piper.synthesize(BASE_VOICE, text) for text in texts]
    base_embedding = embedder.embed(_concat(base_speech))

    rows: list[Row] = []
    clone_speech: list[list[Pcm]] = []
    convert_seconds = 0.0
    audio_seconds = 0.0
    for label, sample in _references(piper, quick):
        profile = analyse_sample(sample)
        conversion = cloner.conversion(profile)
        started = time.perf_counter()
        speech = [convert(pcm, conversion) for pcm in base_speech]
        convert_seconds += time.perf_counter() - started
        audio_seconds += sum(pcm.duration_seconds for pcm in base_speech)
        clone_speech.append(speech)
        reference_embedding = embedder.embed(sample)
        rows.append(
            Row(
                reference=label,
                f0_hz=profile.f0_median_hz,
                formant_scale=conversion.formant_scale,
                base_similarity=_cosine(reference_embedding, base_embedding),
                clone_similarity=_cosine(reference_embedding, embedder.embed(_concat(speech))),
            )
        )

    whisper = WhisperEngine(Path(tempfile.gettempdir()) / "voice-service-bench")
    base_wer = _wer(whisper, base_speech, texts)
    clone_wer = _wer(whisper, [pcm for speech in clone_speech for pcm in speech], texts * len(rows))
    return {
        "base_f0_hz": cloner.base_profile.f0_median_hz,
        "rows": rows,
        "average_gain": statistics.mean(row.gain for row in rows),
        "conversion_rtf": convert_seconds / audio_seconds,
        "base_wer": base_wer,
        "clone_wer": clone_wer,
    }


def _wer(whisper: WhisperEngine, speech: Sequence[Pcm], texts: Sequence[str]) -> float:
    edits = words = 0
    for pcm, text in zip(speech, texts, strict=True):
        heard = whisper.transcribe(_to_float(pcm, WHISPER_RATE), "en").text
        count, total = word_error_rate(text, heard)
        edits, words = edits + count, words + total
    return edits / words


def _print(figures: dict[str, Any]) -> None:
    print(f"base voice median F0 {figures['base_f0_hz']:.0f} Hz")
    print(f"{'reference':<20} {'F0 Hz':>6} {'warp':>5} {'base':>6} {'clone':>6} {'gain':>6}")
    for row in figures["rows"]:
        print(
            f"{row.reference:<20} {row.f0_hz:6.0f} {row.formant_scale:5.2f} "
            f"{row.base_similarity:6.3f} {row.clone_similarity:6.3f} {row.gain:+6.3f}"
        )
    print(f"average gain {figures['average_gain']:+.3f} (target >= +0.15)")
    print(f"conversion RTF {figures['conversion_rtf']:.3f}")
    print(
        f"WER base {figures['base_wer']:.1%}, clone {figures['clone_wer']:.1%} "
        "(target: clone within 5 points)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="3 references, 1 test text")
    _print(measure(parser.parse_args().quick))


if __name__ == "__main__":
    main()
