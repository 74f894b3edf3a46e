"""The engines a node runs, loaded once at start and shared by every request.

Text-to-speech engines are registered by name (`TTS_ENGINES`), loaded as settings say, and
found by the prefix of a voice key ("piper:en_US-joe-medium" is Piper's).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from voice_service.engines.chunking import FIRST_CHUNK_CHARS, split_text
from voice_service.engines.espeak import EspeakEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import (
    EngineVoice,
    Pcm,
    SpeechToText,
    TextToSpeech,
    UnknownVoice,
    VoiceCloner,
)
from voice_service.engines.whisper import WhisperEngine, english_model_dir
from voice_service.engines.world import WorldCloner
from voice_service.settings import Settings

# Clones speak through this neural voice, converted toward each sample's profile.
CLONE_BASE_VOICE = "piper:en_US-joe-medium"
# Engine names beside the TTS engines' (operators see them in the metrics).
TRANSCRIBER = "whisper"
CLONER = "world"

TTS_ENGINES: dict[str, Callable[[Settings], TextToSpeech]] = {
    "piper": lambda settings: PiperEngine(settings.piper_voices_dir),
    "espeak": lambda _settings: EspeakEngine(),
}


@dataclass(frozen=True, slots=True)
class Engines:
    speakers: Mapping[str, TextToSpeech]  # by voice-key prefix, in catalogue order
    transcriber: SpeechToText
    cloner: VoiceCloner | None  # None when its base voice's engine is not loaded

    @classmethod
    def load(cls, settings: Settings) -> Engines:
        speakers = {name: TTS_ENGINES[name](settings) for name in settings.tts_engine_names}
        base = speakers.get(CLONE_BASE_VOICE.split(":", 1)[0])
        return cls(
            speakers=speakers,
            transcriber=load_whisper(settings),
            cloner=WorldCloner(base, CLONE_BASE_VOICE) if base is not None else None,
        )

    def catalogue(self) -> list[EngineVoice]:
        return [voice for engine in self.speakers.values() for voice in engine.voices()]

    def speak(
        self,
        voice_key: str,
        profile: Mapping[str, Any] | None,
        text: str,
        *,
        quick_start: bool = False,
    ) -> Iterator[Pcm]:
        """`text` spoken chunk by chunk (`chunking.split_text`), so memory stays bounded
        whatever its length and each chunk can be sent as soon as it is made; in a clone's
        voice when its `profile` is given; with a short first chunk for a `quick_start`.
        Raises `UnknownVoice` before any work."""
        speak_chunk = self.chunk_speaker(voice_key, profile)
        first_chars = FIRST_CHUNK_CHARS if quick_start else None
        for chunk in split_text(text, first_chars=first_chars):
            yield speak_chunk(chunk)

    @staticmethod
    def speaker_name(voice_key: str, profile: Mapping[str, Any] | None) -> str:
        """The engine that speaks for `voice_key` (as `chunk_speaker` picks it)."""
        return CLONER if profile is not None else voice_key.split(":", 1)[0]

    def chunk_speaker(
        self, voice_key: str, profile: Mapping[str, Any] | None
    ) -> Callable[[str], Pcm]:
        if profile is not None:  # a clone: the base voice converted toward the sample
            # The profile measures only the sample, so clones survive a change of base voice.
            if self.cloner is None:
                raise UnknownVoice(voice_key)
            return self.cloner.speaker(profile)
        engine = self.speakers.get(voice_key.split(":", 1)[0])
        if engine is None or not any(voice.key == voice_key for voice in engine.voices()):
            raise UnknownVoice(voice_key)
        return lambda chunk: engine.synthesize(voice_key, chunk)


def load_whisper(settings: Settings) -> WhisperEngine:
    cores = os.cpu_count() or 1
    return WhisperEngine(
        settings.data_dir,
        model_dir=settings.whisper_model_dir,
        # tiny.en beats the packaged base model on English in speed and accuracy; a model
        # the operator chose is not second-guessed.
        english_model=english_model_dir() if settings.whisper_model_dir is None else None,
        # One model replica per pool slot, threads shared out so they never exceed cores.
        num_workers=settings.pool_size,
        cpu_threads=max(1, cores // settings.pool_size),
    )
