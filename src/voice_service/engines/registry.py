"""The engines a node runs, loaded once at start and shared by every request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from voice_service.engines.espeak import EspeakEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import EngineVoice, Pcm, TextToSpeech
from voice_service.settings import Settings


@dataclass(frozen=True, slots=True)
class Engines:
    speakers: Sequence[TextToSpeech]

    @classmethod
    def load(cls, settings: Settings) -> Engines:
        return cls(speakers=(PiperEngine(settings.piper_voices_dir), EspeakEngine()))

    def catalogue(self) -> list[EngineVoice]:
        return [voice for engine in self.speakers for voice in engine.voices()]

    def synthesize(self, voice_key: str, text: str) -> Pcm:
        for engine in self.speakers:
            if any(voice.key == voice_key for voice in engine.voices()):
                return engine.synthesize(voice_key, text)
        raise KeyError(voice_key)
