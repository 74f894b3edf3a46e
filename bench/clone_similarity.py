"""How much a clone sounds like its speaker, against how much the speaker sounds like himself.

Run `python -m bench.clone_similarity [--quick]` (needs `pip install resemblyzer`, which is a
benchmark dependency only: it brings torch).

Speakers are real people: the recordings of Debian's `pocketsphinx-testdata` (`.ci/run`
installs it), three speakers by their embeddings (each clip's nearest clips are its own
speaker's, cosine 0.6-0.9 against 0.0-0.5 across): the LibriVox reader, the playing-card
caller, and the one who says the commands and digit strings (goforward, numbers, something,
tidigits' dhd, which cluster together as tightly as one reader's sentences). Each speaker's
clips are split in two: the *sample* the clone is made from, and *held-out* clips the
judges compare against, so a clone cannot score by copying one recording's room or words.

Figures per speaker and judge (Resemblyzer, and the d-vector the service itself chooses
bases with, so the d-vector judge favours the choice and Resemblyzer is the independent one):
- ceiling: cosine(sample, held-out), the same person in different clips;
- base: cosine(held-out, Piper's joe saying the test texts), the single English base;
- clone: cosine(held-out, the service's clone saying them), from the base it chose.
The gain is clone minus base. Intelligibility: Whisper (base model, English given) word error
rate of the clones' speech against joe's, on the same texts. The full run also clones every
speaker from every candidate base, which is how the candidates were vetted (see
`kokoro.CLONE_STYLES`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.audio import WHISPER_RATE, to_16k
from bench.recordings import read_recording
from bench.wer import word_errors
from voice_service.engines.catalog import CLONE_BASE_VOICE
from voice_service.engines.kokoro import KokoroEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import Pcm, TextToSpeech
from voice_service.engines.speaker_embedding import SpeakerEncoder, cosine
from voice_service.engines.whisper import WhisperEngine
from voice_service.engines.world import (
    ANALYSIS_RATE,
    BaseVoice,
    Conversion,
    VoiceProfile,
    convert,
)
from voice_service.engines.world.timbre import Timbre
from voice_service.inference.engines import load_cloner

# What the base voice and the clone say.
TEST_TEXTS = (
    "Please send the quarterly report to the finance team before Friday afternoon.",
    "The weather today is sunny with a light breeze coming from the west.",
    "She opened the window, looked at the mountains, and decided to stay another week.",
)

_LIBRIVOX = "librivox/sense_and_sensibility_01_austen_64kb-{}.wav"


@dataclass(frozen=True)
class Speaker:
    name: str
    sample: tuple[str, ...]  # files under speech_set.POCKETSPHINX_DATA: what the clone is made from
    held_out: tuple[str, ...]  # what the judges compare with


SPEAKERS = (
    Speaker(
        "librivox reader",  # 12.4 s sample, 12.3 s held out
        tuple(_LIBRIVOX.format(n) for n in ("0870", "0890")),
        tuple(_LIBRIVOX.format(n) for n in ("0880", "0920", "0930")),
    ),
    Speaker(  # 6.6 s, 3.1 s
        "card caller",
        ("cards/003.wav", "cards/004.wav", "cards/005.wav"),
        ("cards/001.wav", "cards/002.wav"),
    ),
    Speaker(  # 7.0 s, 5.2 s
        "command speaker",
        ("numbers.raw", "something.raw"),
        ("goforward.raw", "tidigits/dhd.2934z.raw"),
    ),
)
QUICK_SPEAKERS = ("card caller",)

Audio = npt.NDArray[np.float32]
Judge = Callable[[Audio], npt.NDArray[np.float32]]


@dataclass(frozen=True)
class Row:
    """One speaker's figures; similarities are Resemblyzer's, `dvector_*` the d-vector's."""

    reference: str
    base: str  # the base voice the service chose
    f0_hz: float
    formant_scale: float
    ceiling: float
    base_similarity: float  # joe, the single English base
    clone_similarity: float
    dvector_ceiling: float
    dvector_base_similarity: float
    dvector_clone_similarity: float

    @property
    def gain(self) -> float:
        return self.clone_similarity - self.base_similarity

    @property
    def dvector_gain(self) -> float:
        return self.dvector_clone_similarity - self.dvector_base_similarity


def joined(names: Sequence[str]) -> Audio:
    return np.concatenate([read_recording(name) for name in names])


def _pcm(audio: Audio) -> Pcm:
    return Pcm(np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16), ANALYSIS_RATE)


def _concat(parts: Sequence[Pcm]) -> Audio:
    pause = np.zeros(WHISPER_RATE // 4, dtype=np.float32)
    return np.concatenate([piece for part in parts for piece in (to_16k(part), pause)])


def _resemblyzer() -> Judge:
    from resemblyzer import VoiceEncoder, preprocess_wav

    encoder = VoiceEncoder("cpu", verbose=False)
    return lambda audio: np.asarray(
        encoder.embed_utterance(preprocess_wav(audio, WHISPER_RATE)), dtype=np.float32
    )


@dataclass(frozen=True)
class _Clone:
    """One speaker cloned from one base voice."""

    speech: list[Pcm]
    profile: VoiceProfile
    conversion: Conversion


def measure(quick: bool) -> dict[str, Any]:
    """Run the benchmark; `quick` clones one speaker, says one text, vets no candidates."""
    data_dir = Path(tempfile.gettempdir()) / "voice-service-bench"
    engines: dict[str, TextToSpeech] = {"piper": PiperEngine(), "kokoro": KokoroEngine(data_dir)}
    cloner = load_cloner(engines)  # the service's own, with its shipped base profiles
    assert cloner is not None
    bases = [BaseVoice.of(key, engines[key.split(":", 1)[0]]) for key in cloner.base_voices]
    encoder = SpeakerEncoder()
    judges: dict[str, Judge] = {"resemblyzer": _resemblyzer(), "dvector": encoder.embed}
    texts = TEST_TEXTS[:1] if quick else TEST_TEXTS
    speakers = [s for s in SPEAKERS if s.name in QUICK_SPEAKERS] if quick else list(SPEAKERS)

    samples = {s.name: _pcm(joined(s.sample)) for s in speakers}
    chosen = {name: cloner.clone(sample).profile for name, sample in samples.items()}
    vetted = [CLONE_BASE_VOICE] if quick else list(cloner.base_voices)
    wanted = {*vetted, *(str(profile["base_voice"]) for profile in chosen.values())}
    base_speech = {
        base.key: [base.tts.synthesize(base.key, text) for text in texts]
        for base in bases
        if base.key in wanted
    }

    convert_seconds = audio_seconds = 0.0
    clones: dict[tuple[str, str], _Clone] = {}
    for name, stored in chosen.items():
        for key in {*vetted, str(stored["base_voice"])}:
            profile = VoiceProfile.from_dict({**stored, "base_voice": key})
            conversion = Conversion.between(cloner.base_profile(key), profile)
            timbre = None if profile.timbre is None else Timbre.from_text(profile.timbre)
            started = time.perf_counter()
            speech = [convert(pcm, conversion, timbre) for pcm in base_speech[key]]
            convert_seconds += time.perf_counter() - started
            audio_seconds += sum(pcm.duration_seconds for pcm in base_speech[key])
            clones[name, key] = _Clone(speech, profile, conversion)

    embedded = {
        judge: _similarities(embed, speakers, samples, base_speech, clones)
        for judge, embed in judges.items()
    }
    rows = [
        _row(speaker.name, str(chosen[speaker.name]["base_voice"]), clones, embedded)
        for speaker in speakers
    ]
    whisper = WhisperEngine(data_dir)
    chosen_speech = [pcm for row in rows for pcm in clones[row.reference, row.base].speech]
    return {
        "rows": rows,
        "average_gain": statistics.mean(row.gain for row in rows),
        "dvector_average_gain": statistics.mean(row.dvector_gain for row in rows),
        "ceiling": statistics.mean(row.ceiling for row in rows),
        "dvector_ceiling": statistics.mean(row.dvector_ceiling for row in rows),
        "clone_similarity": statistics.mean(row.clone_similarity for row in rows),
        "dvector_clone_similarity": statistics.mean(row.dvector_clone_similarity for row in rows),
        "conversion_rtf": convert_seconds / audio_seconds,
        "base_wer": _wer(whisper, base_speech[CLONE_BASE_VOICE], texts),
        "clone_wer": _wer(whisper, chosen_speech, texts * len(rows)),
        "candidates": {
            key: _candidate(key, whisper, texts, speakers, base_speech, clones, embedded)
            for key in vetted
        },
    }


Similarities = dict[str, dict[tuple[str, str], float]]


def _similarities(
    embed: Judge,
    speakers: Sequence[Speaker],
    samples: dict[str, Pcm],
    base_speech: dict[str, list[Pcm]],
    clones: dict[tuple[str, str], _Clone],
) -> Similarities:
    """Cosines with each speaker's held-out clips: of the sample ("ceiling"), of each base
    voice (keyed by the base), of each clone (keyed by speaker and base)."""
    held_out = {s.name: embed(joined(s.held_out)) for s in speakers}
    bases = {key: embed(_concat(speech)) for key, speech in base_speech.items()}
    return {
        "ceiling": {
            (name, ""): cosine(held_out[name], embed(to_16k(sample)))
            for name, sample in samples.items()
        },
        "base": {
            (name, key): cosine(held_out[name], e) for name in held_out for key, e in bases.items()
        },
        "clone": {
            (name, key): cosine(held_out[name], embed(_concat(clone.speech)))
            for (name, key), clone in clones.items()
        },
    }


def _row(
    name: str, base: str, clones: dict[tuple[str, str], _Clone], embedded: dict[str, Similarities]
) -> Row:
    clone = clones[name, base]
    resemblyzer, dvector = embedded["resemblyzer"], embedded["dvector"]
    return Row(
        reference=name,
        base=base,
        f0_hz=clone.profile.f0_median_hz,
        formant_scale=clone.conversion.formant_scale,
        ceiling=resemblyzer["ceiling"][name, ""],
        base_similarity=resemblyzer["base"][name, CLONE_BASE_VOICE],
        clone_similarity=resemblyzer["clone"][name, base],
        dvector_ceiling=dvector["ceiling"][name, ""],
        dvector_base_similarity=dvector["base"][name, CLONE_BASE_VOICE],
        dvector_clone_similarity=dvector["clone"][name, base],
    )


def _candidate(
    key: str,
    whisper: WhisperEngine,
    texts: Sequence[str],
    speakers: Sequence[Speaker],
    base_speech: dict[str, list[Pcm]],
    clones: dict[tuple[str, str], _Clone],
    embedded: dict[str, Similarities],
) -> dict[str, float]:
    """Every speaker cloned from the base `key`: gains over joe's base similarity, WER."""
    names = [s.name for s in speakers]
    gains = {
        judge: statistics.mean(
            figures["clone"][name, key] - figures["base"][name, CLONE_BASE_VOICE] for name in names
        )
        for judge, figures in embedded.items()
    }
    speech = [pcm for name in names for pcm in clones[name, key].speech]
    return {
        "base_wer": _wer(whisper, base_speech[key], texts),
        "clone_wer": _wer(whisper, speech, list(texts) * len(names)),
        "gain": gains["resemblyzer"],
        "dvector_gain": gains["dvector"],
    }


def _wer(whisper: WhisperEngine, speech: Sequence[Pcm], texts: Sequence[str]) -> float:
    edits = words = 0
    for pcm, text in zip(speech, texts, strict=True):
        heard = whisper.transcribe(to_16k(pcm), "en").text
        count, total = word_errors(text, heard)
        edits, words = edits + count, words + total
    return edits / words


def _print(figures: dict[str, Any]) -> None:
    print(
        f"{'speaker':<16} {'base chosen':<22} {'F0 Hz':>6} {'warp':>5} "
        f"{'ceiling':>7} {'joe':>6} {'clone':>6} {'gain':>6}   (Resemblyzer | d-vector)"
    )
    for row in figures["rows"]:
        print(
            f"{row.reference:<16} {row.base:<22} {row.f0_hz:6.0f} {row.formant_scale:5.2f} "
            f"{row.ceiling:7.3f} {row.base_similarity:6.3f} {row.clone_similarity:6.3f} "
            f"{row.gain:+6.3f} | {row.dvector_ceiling:.3f} {row.dvector_base_similarity:.3f} "
            f"{row.dvector_clone_similarity:.3f} {row.dvector_gain:+.3f}"
        )
    print(
        f"average gain {figures['average_gain']:+.3f} Resemblyzer, "
        f"{figures['dvector_average_gain']:+.3f} d-vector; clone {figures['clone_similarity']:.3f}"
        f" against a ceiling of {figures['ceiling']:.3f} (d-vector "
        f"{figures['dvector_clone_similarity']:.3f} against {figures['dvector_ceiling']:.3f})"
    )
    print(f"conversion RTF {figures['conversion_rtf']:.3f}")
    print(f"WER joe {figures['base_wer']:.1%}, clones {figures['clone_wer']:.1%}")
    print(f"{'candidate base':<24} {'WER':>6} {'clone':>6} {'gain':>7} {'d-vec':>7}")
    for key, row in figures["candidates"].items():
        print(
            f"{key:<24} {row['base_wer']:6.1%} {row['clone_wer']:6.1%} "
            f"{row['gain']:+7.3f} {row['dvector_gain']:+7.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1 speaker, 1 text, no vetting")
    _print(measure(parser.parse_args().quick))


if __name__ == "__main__":
    main()
