"""The node's providers, in file order: which one transcribes a request, which speaks a
voice, which clones; and what /readyz says of them.

Provider voices join the catalogue with the key `<provider>:<voice>`, so their ids derive
from the file (the same on every node and after every restart). A clone made at a provider
speaks with the key `<provider>:<the provider's voice id>`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from voice_service.engines.protocols import EngineVoice
from voice_service.inference.providers.config import ANY_LANGUAGE, load_providers
from voice_service.inference.providers.languages import WHISPER_LANGUAGES
from voice_service.inference.providers.provider import Provider
from voice_service.kit.metrics.registry import Metrics
from voice_service.settings import Settings


@dataclass(frozen=True, slots=True)
class ProviderVoice:
    provider: Provider
    voice: str  # the provider's own name or id for it


class Providers:
    def __init__(self, providers: list[Provider]) -> None:
        self.all = providers
        self._by_name = {provider.name: provider for provider in providers}

    @classmethod
    def from_settings(cls, settings: Settings, metrics: Metrics) -> Providers:
        """The providers file's providers (none without one); raises `ProvidersFileError`."""
        if settings.providers_file is None:
            return cls([])
        return cls(
            [
                Provider(resolved, metrics, settings.queue_bound)
                for resolved in load_providers(settings.providers_file)
            ]
        )

    def transcriber(self, language: str | None, *, local: bool) -> Provider | None:
        """Where a transcription goes: the first provider whose languages cover `language`
        (None: not given, so one that takes any); None for the local engine. A node without
        one (`local` false) sends a request no provider claims to its first transcriber."""
        for provider in self.all:
            if provider.transcribes(language):
                return provider
        if local:
            return None
        return next((p for p in self.all if p.config.transcription is not None), None)

    def languages(self) -> frozenset[str]:
        """The language hints some provider takes."""
        codes: set[str] = set()
        for provider in self.all:
            section = provider.config.transcription
            if section is not None:
                if ANY_LANGUAGE in section.languages:
                    return WHISPER_LANGUAGES
                codes.update(section.languages)
        return frozenset(codes)

    @property
    def transcribes(self) -> bool:
        return any(provider.config.transcription is not None for provider in self.all)

    def voices(self) -> list[EngineVoice]:
        """Every `[provider.speech]` voice, for the catalogue."""
        return [
            EngineVoice(voice_key(provider.name, voice.voice), voice.name, voice.language)
            for provider in self.all
            if provider.config.speech is not None
            for voice in provider.config.speech.voices
        ]

    def speaker(self, voice_key: str) -> ProviderVoice | None:
        """The provider that speaks `voice_key`, if a provider's (a clone's key included)."""
        name, _, voice = voice_key.partition(":")
        provider = self._by_name.get(name)
        return ProviderVoice(provider, voice) if provider is not None and voice else None

    def cloner(self) -> Provider | None:
        """The first provider that clones; clones are made there rather than locally."""
        return next((p for p in self.all if p.config.cloning is not None), None)

    def readiness(self) -> dict[str, Any]:
        """Per provider: whether it can take a request, and each replica's state."""
        report: dict[str, Any] = {}
        for provider in self.all:
            now = provider.replicas.clock()
            report[provider.name] = {
                "kind": provider.config.kind,
                "can_serve": provider.replicas.can_serve,
                "replicas": [
                    {
                        "url": replica.shown_url,
                        "state": str(replica.state(now)),
                        "in_flight": replica.in_flight,
                    }
                    for replica in provider.replicas.replicas
                ],
            }
        return report

    async def close(self) -> None:
        await asyncio.gather(*(provider.close() for provider in self.all))


def voice_key(provider: str, voice: str) -> str:
    return f"{provider}:{voice}"
