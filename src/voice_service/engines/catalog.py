"""The engines a node can run in its own process, as data: each one's name, capability,
summary and module. Every name an operator writes (`VOICE_SERVICE_TTS_ENGINES`,
`VOICE_SERVICE_STT_ENGINES`) is checked against this table, and `LocalEngine.load` makes the
engine. Adding an engine is its module, with a `load(options)` function, and a row here.
Engines on other servers (providers) are the other half: see `voice_service.inference.providers`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from voice_service.core.vocabulary import Capability


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """What the operator's settings tell the engines' `load` functions."""

    data_dir: Path  # where packaged models are joined
    piper_voices_dir: Path | None
    piper_voice_files: tuple[Path, ...]  # pulled voices' `.onnx` files, configs beside them
    whisper_model_dir: Path | None
    whisper_device: str  # cpu, cuda or auto
    whisper_compute_type: str | None  # None: the device's default
    pool_size: int  # inference workers, which share the cores


@dataclass(frozen=True, slots=True)
class LocalEngine:
    """An engine that runs in the inference pool: CPU-bound (or on the node's GPU), one
    worker thread per call. Its name prefixes its voice keys ("piper:en_US-joe-medium")."""

    name: str
    capability: Capability
    summary: str  # what it is, for the settings' help
    # Imported only when the engine is loaded, so a command that loads none (`voice-service
    # keys list`) never pays for onnxruntime, CTranslate2 or pyworld.
    module: str

    def load(self, options: EngineOptions) -> object:
        """The engine, made by its module's `load(options)`."""
        made: object = importlib.import_module(self.module).load(options)
        return made


# Best first: the catalogue lists voices in this order, so the first voice of a language
# is its best.
LOCAL_ENGINES: tuple[LocalEngine, ...] = (
    LocalEngine(
        "piper",
        Capability.TEXT_TO_SPEECH,
        "neural English; the default clone base",
        "voice_service.engines.piper",
    ),
    LocalEngine(
        "kokoro",
        Capability.TEXT_TO_SPEECH,
        "neural Spanish, French, Italian, Portuguese; more clone bases",
        "voice_service.engines.kokoro",
    ),
    LocalEngine(
        "espeak",
        Capability.TEXT_TO_SPEECH,
        "basic voices in 50+ languages",
        "voice_service.engines.espeak",
    ),
    LocalEngine(
        "whisper",
        Capability.SPEECH_TO_TEXT,
        "faster-whisper, Whisper base by default (WHISPER_MODEL_DIR for another)",
        "voice_service.engines.whisper",
    ),
)


def local_engine(name: str) -> LocalEngine:
    """The catalogue's entry `name` (the settings have checked it is one)."""
    (engine,) = (engine for engine in LOCAL_ENGINES if engine.name == name)
    return engine


# The cloner is not chosen by name: it is loaded whenever the clones' base voice is, with
# the clone bases every loaded engine offers (see `inference.engines.load_cloner`). Its name
# labels its work in the metrics.
CLONER = "world"
# What the metrics call the local check and decoding of a file a provider transcribes or
# clones from (the seconds billed are always our decoder's).
DECODER = "decoder"
# What the metrics call telling a transcript's speakers apart (`engines.diarization`).
DIARIZER = "diarizer"
# Clones speak through the base voice that, converted toward their sample's profile, sounds
# nearest it: this one, or one of Kokoro's English clone bases (`kokoro.CLONE_STYLES`) when
# Kokoro is loaded. This one is the default (see `WorldCloner`): no Piper, no cloning.
CLONE_BASE_VOICE = "piper:en_US-joe-medium"


def engine_of(voice_key: str) -> str:
    """The engine (or provider) whose voice `voice_key` is: the part before its colon."""
    return voice_key.split(":", 1)[0]


def engine_names(capability: Capability) -> tuple[str, ...]:
    return tuple(engine.name for engine in LOCAL_ENGINES if engine.capability is capability)


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
