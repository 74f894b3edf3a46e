"""The engines a node runs, loaded once at start and shared by every request."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from voice_service.engines.chunking import split_text
from voice_service.engines.espeak import EspeakEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import EngineVoice, Pcm, SpeechToText, TextToSpeech
from voice_service.engines.whisper import WhisperEngine, english_model_dir
from voice_service.engines.world import VoiceProfile, WorldCloner
from voice_service.settings import Settings

# Clones speak through this neural voice, converted toward each sample's profile.
CLONE_BASE_VOICE = "piper:en_US-joe-medium"


@dataclass(frozen=True, slots=True)
class Engines:
    speakers: Sequence[TextToSpeech]
    transcriber: SpeechToText
    cloner: WorldCloner

    @classmethod
    def load(cls, settings: Settings) -> Engines:
        piper = PiperEngine(settings.piper_voices_dir)
        return cls(
            speakers=(piper, EspeakEngine()),
            transcriber=load_whisper(settings),
            cloner=WorldCloner(piper, CLONE_BASE_VOICE),
        )

    def catalogue(self) -> list[EngineVoice]:
        return [voice for engine in self.speakers for voice in engine.voices()]

    def speak(self, voice_key: str, profile: VoiceProfile | None, text: str) -> Iterator[Pcm]:
        """`text` spoken chunk by chunk (`chunking.split_text`), so memory stays bounded
        whatever its length; in a clone's voice when its `profile` is given."""
        speak_chunk = self._chunk_speaker(voice_key, profile)
        for chunk in split_text(text):
            yield speak_chunk(chunk)

    def _chunk_speaker(self, voice_key: str, profile: VoiceProfile | None) -> Callable[[str], Pcm]:
        if profile is not None:  # a clone: the base voice converted toward the sample
            conversion = self.cloner.conversion(profile)
            return lambda chunk: self.cloner.speak(conversion, chunk)
        for engine in self.speakers:
            if any(voice.key == voice_key for voice in engine.voices()):
                return lambda chunk: engine.synthesize(voice_key, chunk)
        raise KeyError(voice_key)


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
