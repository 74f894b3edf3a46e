"""What users hear: intelligibility, naturalness and CPU cost of the voices the service offers.

Run `python -m bench.tts_quality [--quick] [--language es ...]`. The engines are built as the
service builds them (`Engines.load`) and speak through its chunked path (`Engines.speak`), so
the figures are of the audio a client receives.

- Round-trip word error rate per catalogue language (`bench.sentences`; for Japanese the
  character error rate of the readings, `bench.wer`): the language's default voice (the
  first `GET /voices` lists for it) and its eSpeak voice (the default before Kokoro; none
  reads Japanese) speak the sentences; their joined speech, resampled to 16 kHz as the
  decoder hands uploads to Whisper, is transcribed by the service's Whisper with the
  language given. A language no loaded voice speaks (Japanese without the ja extra) is
  left out.
- Held-out round-trip WER (`bench.heldout_sentences`: en, es, fr, it, pt; no voice was chosen
  or tuned on them): the default voice speaks each sentence as its own request, and each is
  transcribed on its own (a long join would be cut into Whisper's slices mid-word); the
  figure is the edits over all twenty sentences' words. Issue 23's bar: every default voice
  of es, fr, it, pt at 0.20 or less, their mean at 0.10 or less.
- DNSMOS P.835 (Microsoft's non-intrusive MOS predictor; `speechmos` ships its ONNX models):
  overall quality (OVRL), speech signal (SIG) and background (BAK), 1 to 5, for each of those
  voices and for a WORLD clone of a voice that is not in the catalogue.
- CPU seconds per second of audio, per engine: the process's CPU time around each call, one
  call at a time, so the engines' own worker threads count too. "world" is a clone's whole
  path (Piper's speech, then its conversion). Whisper encodes whole 30 s windows, so on these
  clips of 3-15 s it costs more per second than on long recordings.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime

from bench.audio import WHISPER_RATE, resample, to_16k
from bench.heldout_sentences import HELDOUT_SENTENCES
from bench.sentences import SENTENCES
from bench.wer import measure_name, word_error_rate, word_errors
from voice_service.engines.espeak import KEY_PREFIX as ESPEAK_PREFIX
from voice_service.engines.espeak import EspeakEngine
from voice_service.engines.protocols import EngineVoice, Pcm, TranscribeOptions
from voice_service.inference.engines import Engines
from voice_service.settings import Settings
from voice_service.voices.repository import catalogue_order

# Round-trip WER of the eSpeak voices through Whisper base, before Kokoro (issue 12).
PREVIOUS_WER = {"es": 0.26, "fr": 0.71, "it": 0.32, "pt": 0.64, "de": 0.16}
# Shared with bench.clone_similarity: the models joined into it are reused between runs.
DATA_DIR = Path(tempfile.gettempdir()) / "voice-service-bench"
# A Piper voice pack that samples noise (the packaged Joe samples none) draws it from
# onnxruntime's generator, which each new session seeds once from the global seed: seeding
# before the engines load makes a run repeat.
SEED = 12

# The clone's speaker: an espeak-ng variant (female, with its own pitch, formants and voice
# quality) that no catalogue voice is, so the clone has a long way to go from its base voice.
CLONE_REFERENCE = EngineVoice(f"{ESPEAK_PREFIX}en-us+f2", "espeak female f2", "en-US")
# What that speaker "uploads": about 12 s of read speech (a --quick run takes the first
# sentence only, as it speaks one sentence per language).
REFERENCE_SENTENCES = (
    "Every morning I walk along the river and watch the boats drift slowly past the old "
    "stone bridge.",
    "Would you like a cup of tea, or would you rather have some cold water?",
    "My neighbour's children were playing football in the garden until it began to rain.",
)


@dataclass
class CpuMeter:
    """CPU seconds and seconds of audio, summed per engine."""

    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    audio: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, engine: str, cpu_seconds: float, audio_seconds: float) -> None:
        self.cpu[engine] += cpu_seconds
        self.audio[engine] += audio_seconds

    def per_audio_second(self) -> dict[str, float]:
        return {engine: self.cpu[engine] / self.audio[engine] for engine in self.cpu}


@dataclass(frozen=True)
class Spoken:
    """One voice's speech of a language's sentences, as Whisper and DNSMOS get it."""

    voice_key: str
    voice: str
    audio: npt.NDArray[np.float32]  # mono, WHISPER_RATE
    wer: float


def default_voice(catalogue: Iterable[EngineVoice], language: str) -> EngineVoice:
    """The first voice of `language` (a primary subtag, "pt") in `GET /voices`.

    `Engines.catalogue()` alone is not that order: it keeps each engine's own order, in which
    Kokoro lists Kumo before Gongitsune for Spanish."""
    return min(
        (voice for voice in catalogue if _primary(voice.language) == language),
        key=lambda voice: catalogue_order(voice.key, voice.language, voice.name),
    )


def _primary(tag: str | None) -> str:
    return (tag or "").split("-", 1)[0].lower()


def _speak(
    engines: Engines,
    meter: CpuMeter,
    voice_key: str,
    profile: Mapping[str, Any] | None,
    texts: Sequence[str],
) -> Pcm:
    """`texts` one after the other, as the service speaks a longer text chunk by chunk."""
    parts: list[Pcm] = []
    for text in texts:
        started = time.process_time()
        chunks = [speak().pcm for speak in engines.speech_parts(voice_key, profile, text)]
        seconds = sum(len(chunk.samples) for chunk in chunks) / chunks[0].sample_rate
        meter.add(Engines.speaker_name(voice_key, profile), time.process_time() - started, seconds)
        parts += chunks
    return Pcm(np.concatenate([part.samples for part in parts]), parts[0].sample_rate)


def _transcribe(
    engines: Engines, meter: CpuMeter, audio: npt.NDArray[np.float32], language: str
) -> str:
    assert engines.transcribers is not None, "the benchmark loads the local Whisper"
    started = time.process_time()
    stream = engines.transcribers.model(None).stream(audio, TranscribeOptions(language=language))
    text = " ".join(segment.text for segment in stream.segments).strip()
    # English may take the service's English-only fast path, so it is costed apart.
    engine = f"{engines.transcriber_name}_{'en' if language == 'en' else 'other'}"
    meter.add(engine, time.process_time() - started, audio.size / WHISPER_RATE)
    return text


def _round_trip(
    engines: Engines,
    meter: CpuMeter,
    voice: EngineVoice,
    profile: Mapping[str, Any] | None,
    language: str,
    texts: Sequence[str],
) -> Spoken:
    audio = to_16k(_speak(engines, meter, voice.key, profile, texts))
    heard = _transcribe(engines, meter, audio, language)
    return Spoken(voice.key, voice.name, audio, word_error_rate(" ".join(texts), heard, language))


def heldout_round_trip(
    engines: Engines, meter: CpuMeter, voice: EngineVoice, language: str, texts: Sequence[str]
) -> dict[str, Any]:
    """The held-out figure of `voice`: each of `texts` spoken and heard on its own."""
    edits = total = 0
    misheard: list[dict[str, str]] = []
    for text in texts:
        heard = _transcribe(
            engines, meter, to_16k(_speak(engines, meter, voice.key, None, [text])), language
        )
        errors, words = word_errors(text, heard, language)
        edits, total = edits + errors, total + words
        if errors:
            misheard.append({"said": text, "heard": heard})
    return {
        "voice_key": voice.key,
        "voice": voice.name,
        "wer": edits / max(total, 1),
        "misheard": misheard,
    }


def _clone(engines: Engines, sentences: Sequence[str]) -> tuple[EngineVoice, Mapping[str, Any]]:
    """The voice row and profile the service stores for a clone of `CLONE_REFERENCE`'s
    sample, uploaded at the rate the cloner analyses."""
    if engines.cloner is None:
        raise RuntimeError("the clone figures need the clone's base voice: load Piper")
    voice = EngineVoice(engines.cloner.base_voice, f"WORLD clone of {CLONE_REFERENCE.name}", None)
    reference = EspeakEngine(extra_voices=[CLONE_REFERENCE])
    sample = reference.synthesize(CLONE_REFERENCE.key, " ".join(sentences))
    rate = engines.cloner.sample_rate
    upload = Pcm(resample(sample, rate, "s16").astype(np.int16), rate)
    return voice, engines.cloner.clone(upload).profile


def _dnsmos(audio: npt.NDArray[np.float32]) -> dict[str, float]:
    from speechmos import dnsmos  # benchmark dependency (dev extra)

    # DNSMOS averages 9 s windows, 1 s apart, and repeats a shorter clip to fill one. It
    # doubles the clip until long enough, so a 4 s clip became 16 s: seven windows of the same
    # speech, at 0.6 CPU-s each. Repeated to one window's length, it is scored once.
    window = int(dnsmos.INPUT_LENGTH * WHISPER_RATE)
    if audio.size < window:
        audio = np.resize(audio, window)
    # Resampling can ring a hair past full scale, and DNSMOS refuses samples outside [-1, 1].
    scores = dnsmos.run(np.clip(audio, -1.0, 1.0), WHISPER_RATE)
    return {name: float(scores[f"{name}_mos"]) for name in ("ovrl", "sig", "bak")}


def _figures(spoken: Spoken) -> dict[str, Any]:
    return {
        "voice_key": spoken.voice_key,
        "voice": spoken.voice,
        "wer": spoken.wer,
        "audio_seconds": spoken.audio.size / WHISPER_RATE,
        "dnsmos": _dnsmos(spoken.audio),
    }


def run(
    quick: bool, *, languages: Sequence[str] = tuple(SENTENCES), data_dir: Path = DATA_DIR
) -> dict[str, Any]:
    """Measure `languages`; `quick` speaks one sentence per language instead of three."""
    started = time.perf_counter()
    onnxruntime.set_seed(SEED)
    engines = Engines.load(Settings(data_dir=data_dir))
    catalogue = engines.catalogue()
    espeak = [voice for voice in catalogue if voice.key.startswith(ESPEAK_PREFIX)]
    basic_languages = {_primary(voice.language) for voice in espeak}
    spoken_languages = {_primary(voice.language) for voice in catalogue}
    meter = CpuMeter()
    count = 1 if quick else None

    # DNSMOS runs after every CPU measurement, so its threads cannot add to an engine's time.
    spoken: list[tuple[str, Spoken, Spoken | None]] = []
    heldout: dict[str, dict[str, Any]] = {}
    for language in (language for language in languages if language in spoken_languages):
        texts = SENTENCES[language][:count]
        best = default_voice(catalogue, language)
        heard = _round_trip(engines, meter, best, None, language, texts)
        heard_basic: Spoken | None = None  # eSpeak cannot read Japanese: no basic voice
        if language in basic_languages:
            basic = default_voice(espeak, language)
            # eSpeak still the default (German): one measurement serves both.
            heard_basic = (
                heard
                if basic == best
                else _round_trip(engines, meter, basic, None, language, texts)
            )
        spoken.append((language, heard, heard_basic))
        if language in HELDOUT_SENTENCES:
            heldout[language] = heldout_round_trip(
                engines, meter, best, language, HELDOUT_SENTENCES[language][:count]
            )
    clone_voice, profile = _clone(engines, REFERENCE_SENTENCES[:count])
    clone = _round_trip(engines, meter, clone_voice, profile, "en", SENTENCES["en"][:count])

    return {
        "languages": [
            {
                "language": language,
                "default": _figures(heard),
                "espeak": None if heard_basic is None else _figures(heard_basic),
                "previous_wer": PREVIOUS_WER.get(language),
                "heldout": heldout.get(language),
            }
            for language, heard, heard_basic in spoken
        ],
        "clone": {"reference": CLONE_REFERENCE.name, **_figures(clone)},
        "cpu_per_audio_second": meter.per_audio_second(),
        "seconds": time.perf_counter() - started,
    }


def _print(figures: dict[str, Any]) -> None:
    print(f"{'lang':<5} {'default voice':<35} {'WER':>5} {'eSpeak':>6} {'before':>6}", end="")
    print(f" {'OVRL':>5} {'SIG':>5} {'BAK':>5} {'eSpeak OVRL':>11} {'held-out':>8}")
    for row in figures["languages"]:
        best, basic, previous = row["default"], row["espeak"], row["previous_wer"]
        before = "-" if previous is None else f"{previous:.2f}"
        mos = best["dnsmos"]
        basic_wer = "-" if basic is None else f"{basic['wer']:.2f}"
        basic_mos = "-" if basic is None else f"{basic['dnsmos']['ovrl']:.2f}"
        heldout = "-" if row["heldout"] is None else f"{row['heldout']['wer']:.2f}"
        print(
            f"{row['language']:<5} {best['voice']:<35} {best['wer']:5.2f} {basic_wer:>6}"
            f" {before:>6} {mos['ovrl']:5.2f} {mos['sig']:5.2f} {mos['bak']:5.2f}"
            f" {basic_mos:>11} {heldout:>8}"
        )
    if any(measure_name(row["language"]) != "WER" for row in figures["languages"]):
        print("(Japanese: CER, the character error rate of the readings; see bench.wer)")
    clone, mos = figures["clone"], figures["clone"]["dnsmos"]
    print(
        f"{'en':<5} {clone['voice']:<35} {clone['wer']:5.2f} {'':>6} {'':>6}"
        f" {mos['ovrl']:5.2f} {mos['sig']:5.2f} {mos['bak']:5.2f}"
    )
    print(f"\n{'engine':<26} CPU-s per audio-s")
    for engine, cost in figures["cpu_per_audio_second"].items():
        print(f"{engine:<26} {cost:.3f}")
    print(f"\n{figures['seconds']:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="one sentence per language")
    parser.add_argument(
        "--language", action="append", choices=tuple(SENTENCES), help="repeat; default all"
    )
    args = parser.parse_args()
    _print(run(args.quick, languages=args.language or tuple(SENTENCES)))


if __name__ == "__main__":
    main()
