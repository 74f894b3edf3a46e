"""Formant text-to-speech in many languages with espeak-ng.

No system package is needed: piper-tts's wheel links libespeak-ng statically into
`piper/espeakbridge.so` (exporting the whole C API) and ships `piper/espeak-ng-data`, so we
call that library through ctypes. Python's import of the bridge and our `CDLL` resolve to the
same loaded object, hence one shared espeak-ng state, guarded by `ESPEAK_LOCK`.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import piper

from voice_service.engines.catalog import EngineOptions
from voice_service.engines.espeak_lock import ESPEAK_LOCK
from voice_service.engines.protocols import (
    PHONEMES_OPEN,
    EngineError,
    EngineVoice,
    Pcm,
    phoneme_pieces,
)

_LOGGER = logging.getLogger(__name__)

_PIPER_DIR = Path(piper.__file__).parent
BRIDGE_LIBRARY = _PIPER_DIR / "espeakbridge.so"
DEFAULT_DATA_DIR = _PIPER_DIR / "espeak-ng-data"

KEY_PREFIX = "espeak:"

# Constants from espeak-ng's speak_lib.h.
_AUDIO_OUTPUT_SYNCHRONOUS = 2  # the same mode piper's bridge initializes with
_POS_CHARACTER = 1
_CHARS_UTF8 = 0x1  # plain text, not SSML: user text may contain "<" and "&"
_PHONEMES = 0x100  # phoneme mnemonics between [[ and ]] (only a pronunciation rule's)
_ENDPAUSE = 0x1000
_EE_OK = 0
_RATE = 1  # espeakRATE
_RATE_NORMAL = 175  # espeakRATE_NORMAL, words per minute
_RATE_MINIMUM = 80  # espeakRATE_MINIMUM
_RATE_MAXIMUM = 450  # espeakRATE_MAXIMUM

# (espeak-ng voice name, language tag, English name). A curated list rather than all ~146
# bundled voices: it leaves out test, constructed and fictional languages (Klingon, Quenya…).
# Japanese is absent on purpose: espeak-ng reads kana but says "Chinese letter" for every kanji.
# Keys use espeak-ng's own voice names, which is why British English is "en".
CATALOGUE: tuple[tuple[str, str, str], ...] = (
    ("af", "af", "Afrikaans"),
    ("ar", "ar", "Arabic"),
    ("bg", "bg", "Bulgarian"),
    ("bn", "bn", "Bengali"),
    ("ca", "ca", "Catalan"),
    ("cmn", "zh", "Chinese (Mandarin)"),
    ("cs", "cs", "Czech"),
    ("cy", "cy", "Welsh"),
    ("da", "da", "Danish"),
    ("de", "de", "German"),
    ("el", "el", "Greek"),
    ("en", "en-GB", "English (UK)"),
    ("en-us", "en-US", "English (US)"),
    ("es", "es", "Spanish (Spain)"),
    ("es-419", "es-419", "Spanish (Latin America)"),
    ("et", "et", "Estonian"),
    ("eu", "eu", "Basque"),
    ("fa", "fa", "Persian"),
    ("fi", "fi", "Finnish"),
    ("fr", "fr", "French"),
    ("ga", "ga", "Irish"),
    ("he", "he", "Hebrew"),
    ("hi", "hi", "Hindi"),
    ("hr", "hr", "Croatian"),
    ("hu", "hu", "Hungarian"),
    ("hy", "hy", "Armenian"),
    ("id", "id", "Indonesian"),
    ("is", "is", "Icelandic"),
    ("it", "it", "Italian"),
    ("ka", "ka", "Georgian"),
    ("kk", "kk", "Kazakh"),
    ("ko", "ko", "Korean"),
    ("lt", "lt", "Lithuanian"),
    ("lv", "lv", "Latvian"),
    ("mk", "mk", "Macedonian"),
    ("ms", "ms", "Malay"),
    ("nb", "nb", "Norwegian Bokmål"),
    ("nl", "nl", "Dutch"),
    ("pl", "pl", "Polish"),
    ("pt", "pt-PT", "Portuguese (Portugal)"),
    ("pt-br", "pt-BR", "Portuguese (Brazil)"),
    ("ro", "ro", "Romanian"),
    ("ru", "ru", "Russian"),
    ("sk", "sk", "Slovak"),
    ("sl", "sl", "Slovenian"),
    ("sq", "sq", "Albanian"),
    ("sr", "sr", "Serbian"),
    ("sv", "sv", "Swedish"),
    ("sw", "sw", "Swahili"),
    ("ta", "ta", "Tamil"),
    ("te", "te", "Telugu"),
    ("th", "th", "Thai"),
    ("tr", "tr", "Turkish"),
    ("uk", "uk", "Ukrainian"),
    ("ur", "ur", "Urdu"),
    ("vi", "vi", "Vietnamese"),
    ("yue", "yue", "Chinese (Cantonese)"),
)

# espeak-ng's IPA (`pronunciation.ipa_of`) in espeak-ng's own phoneme mnemonics, which its
# [[ ]] input reads (longest first); ASCII letters not listed are their own mnemonics, and
# symbols neither lists have no mnemonic and are left out.
_MNEMONICS = (
    ("ɑː", "A:"),
    ("ɔː", "O:"),
    ("ɜː", "3:"),
    ("iː", "i:"),
    ("uː", "u:"),
    ("eɪ", "eI"),
    ("aɪ", "aI"),
    ("ɔɪ", "OI"),
    ("oʊ", "oU"),
    ("aʊ", "aU"),
    ("tʃ", "tS"),
    ("dʒ", "dZ"),
    ("ə", "@"),
    ("ɚ", "3"),
    ("ɐ", "a#"),
    ("æ", "a"),
    ("ɑ", "A"),
    ("ɒ", "0"),
    ("ʌ", "V"),
    ("ɛ", "E"),
    ("ɪ", "I"),
    ("ʊ", "U"),
    ("ɔ", "O"),
    ("θ", "T"),
    ("ð", "D"),
    ("ʃ", "S"),
    ("ʒ", "Z"),
    ("ŋ", "N"),
    ("ɹ", "r"),
    ("ɾ", "t#"),
    ("ɡ", "g"),
    ("ç", "C"),
    ("ʔ", "?"),
    ("ɲ", "n^"),
    ("ʎ", "l^"),
    ("ɣ", "Q"),
    ("β", "B"),
    ("ʁ", "R"),
    ("ˈ", "'"),
    ("ˌ", ","),
    ("ː", ":"),
)
_MNEMONIC_LETTERS = frozenset("abdefhijklmnoprstuvwxz ")


def mnemonics(ipa: str) -> str:
    """`ipa` (espeak-ng's IPA) in espeak-ng's phoneme mnemonics."""
    spelled = []
    rest = ipa
    while rest:
        for symbol, mnemonic in _MNEMONICS:
            if rest.startswith(symbol):
                spelled.append(mnemonic)
                rest = rest[len(symbol) :]
                break
        else:
            if rest[0] in _MNEMONIC_LETTERS:
                spelled.append(rest[0])
            rest = rest[1:]
    return "".join(spelled)


def _espeak_input(text: str) -> tuple[str, int]:
    """`text` as espeak-ng reads it, and the flag its phonemes need: a pronunciation rule's
    phonemes as [[mnemonics]], and any "[[" of the text itself kept from opening some."""
    if PHONEMES_OPEN not in text:
        return text, 0
    pieces = [
        f"[[{mnemonics(piece)}]]" if is_phonemes else piece.replace("[[", "[ [")
        for piece, is_phonemes in phoneme_pieces(text)
    ]
    return " ".join(pieces), _PHONEMES


_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


def voice_name(english_name: str) -> str:
    """ "eSpeak French (basic)", "eSpeak English (UK, basic)": the catalogue also holds neural
    voices for some languages, and a person choosing should see which voice is the robotic
    one before hearing it."""
    if english_name.endswith(")"):
        return f"eSpeak {english_name[:-1]}, basic)"
    return f"eSpeak {english_name} (basic)"


def _load_library(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetVoiceByName.restype = ctypes.c_int
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_SetParameter.restype = ctypes.c_int
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p,  # text
        ctypes.c_size_t,  # size
        ctypes.c_uint,  # position
        ctypes.c_int,  # position_type
        ctypes.c_uint,  # end_position
        ctypes.c_uint,  # flags
        ctypes.c_void_p,  # unique_identifier
        ctypes.c_void_p,  # user_data
    ]
    lib.espeak_Synth.restype = ctypes.c_int
    return lib


@functools.cache
def _initialized_library(data_dir: Path) -> tuple[ctypes.CDLL, int]:
    """The library, initialized once per process; returns it with its sample rate.

    Call with ESPEAK_LOCK held. Once, because espeak_Initialize frees and reloads the phoneme
    tables: a version that re-initialized before every call once spoke garbage phonemes
    ("Invalid instruction for phoneme") mid-test. Piper's phonemizer runs it once more when it
    first phonemizes, which `PiperEngine` makes happen at start-up.
    """
    lib = _load_library(BRIDGE_LIBRARY)
    sample_rate = int(
        lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, str(data_dir).encode(), 0)
    )
    if sample_rate <= 0:
        raise EngineError(f"espeak-ng failed to initialize with data in {data_dir}")
    return lib, sample_rate


def load(_options: EngineOptions) -> EspeakEngine:
    return EspeakEngine()


class EspeakEngine:
    """espeak-ng voices for the languages in `CATALOGUE`; 22.05 kHz mono output."""

    speeds = (_RATE_MINIMUM / _RATE_NORMAL, _RATE_MAXIMUM / _RATE_NORMAL)  # the rates it takes

    def __init__(
        self, data_dir: Path = DEFAULT_DATA_DIR, extra_voices: Sequence[EngineVoice] = ()
    ) -> None:
        """`extra_voices`: espeak voice names beyond the catalogue, e.g. variants such as
        `espeak:en-us+f2` (distinct speakers the benchmark uses as cloning references)."""
        self._data_dir = data_dir
        # Filled by the callback during one espeak_Synth call; only touched under ESPEAK_LOCK.
        self._chunks: list[bytes] = []
        # Keep a reference: ctypes frees the C trampoline when the Python object dies.
        self._callback = _SynthCallback(self._on_audio)
        with ESPEAK_LOCK:
            self._lib, self._sample_rate = _initialized_library(data_dir)
            self._voices = (*self._usable_voices(), *extra_voices)
        self._keys = frozenset(voice.key for voice in self._voices)

    def voices(self) -> Sequence[EngineVoice]:
        return self._voices

    def clone_bases(self) -> tuple[str, ...]:
        return ()  # a formant synthesizer's voice is too far from any person's

    def clone_base_languages(self, key: str) -> dict[str, str]:
        raise KeyError(key)  # no voice of it is a clone base

    def synthesize(self, voice_key: str, text: str, speed: float = 1.0) -> Pcm:
        if voice_key not in self._keys:
            raise KeyError(voice_key)
        name = voice_key.removeprefix(KEY_PREFIX)
        with ESPEAK_LOCK:
            # Piper's phonemizer switches voices and (once, lazily) re-runs espeak_Initialize, so
            # set the callback, voice and rate on every call.
            self._lib.espeak_SetSynthCallback(self._callback)
            self._select_voice(name, round(_RATE_NORMAL * speed))
            audio = self._synthesize_locked(text)
        return Pcm(samples=audio, sample_rate=self._sample_rate)

    def _usable_voices(self) -> list[EngineVoice]:
        voices = []
        for name, language, english_name in CATALOGUE:
            if self._lib.espeak_SetVoiceByName(name.encode()) != _EE_OK:
                _LOGGER.warning("espeak-ng voice %r is not in %s; skipped", name, self._data_dir)
                continue
            voices.append(EngineVoice(f"{KEY_PREFIX}{name}", voice_name(english_name), language))
        return voices

    def _select_voice(self, name: str, rate: int) -> None:
        if self._lib.espeak_SetVoiceByName(name.encode()) != _EE_OK:
            raise EngineError(f"espeak-ng could not select voice {name!r}")
        # Loading a voice resets its speed factor ("speed 155" in sv, "speed 80" in uk) but
        # does not recompute the speaking rate from it: German after Swedish came out 40 %
        # fast. Setting the rate recomputes it; durations then match a freshly initialized
        # library for every voice, whatever was spoken before.
        self._lib.espeak_SetParameter(_RATE, rate, 0)

    def _synthesize_locked(self, text: str) -> np.ndarray[tuple[int], np.dtype[np.int16]]:
        said, phonemes = _espeak_input(text)
        encoded = said.encode("utf-8")
        self._chunks = []
        flags = _CHARS_UTF8 | _ENDPAUSE | phonemes
        status = self._lib.espeak_Synth(
            encoded, len(encoded) + 1, 0, _POS_CHARACTER, 0, flags, None, None
        )
        chunks, self._chunks = self._chunks, []
        if status != _EE_OK:
            raise EngineError(f"espeak-ng synthesis failed with status {status}")
        return np.frombuffer(b"".join(chunks), dtype=np.int16).copy()

    def _on_audio(
        self, wav: ctypes._Pointer[ctypes.c_short], num_samples: int, _events: int | None
    ) -> int:
        # A null buffer or zero samples marks the end of synthesis; returning 0 continues.
        if wav and num_samples > 0:
            self._chunks.append(ctypes.string_at(wav, num_samples * 2))
        return 0
