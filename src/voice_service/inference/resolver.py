"""Which engine or provider serves a request: the one place that answers "here, or on
another server?" for every surface (files, live turns, speech, clones)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from voice_service.core.errors import ProviderError
from voice_service.engines.protocols import SpeechToText, VoiceCloner
from voice_service.inference.engines import Engines
from voice_service.inference.providers.provider import Provider
from voice_service.inference.providers.table import Providers, ProviderVoice

NO_CLONER = (
    "This node cannot clone voices: the engine of the clones' base voice "
    "is not among VOICE_SERVICE_TTS_ENGINES."
)
NO_TRANSCRIBER = (
    "This node has no transcription engine: VOICE_SERVICE_STT_ENGINES is empty and "
    "no provider transcribes."
)


@dataclass(frozen=True, slots=True)
class LocalTranscriber:
    """One of this node's models, run in its inference pool (held while it runs)."""

    engine: SpeechToText
    name: str  # its engine's entry in the catalogue, which labels its jobs
    model: str  # which of the engine's models: "base", "large-v3-turbo"


def transcriber_for(
    engines: Engines, providers: Providers, language: str | None, model: str | None = None
) -> LocalTranscriber | Provider:
    """Who transcribes audio in `language` (None: not given): the provider the providers
    file routes it to (see `Providers.transcriber`), else this node's engine, on `model`
    (None: its default). A request that names one of this node's models is served by it,
    whatever the routes say. Raises ProviderError when there is neither."""
    local = engines.transcribers
    if model is None or local is None:
        provider = providers.transcriber(language, local=local is not None)
        if provider is not None:
            return provider
    if local is None:
        raise ProviderError(NO_TRANSCRIBER)
    chosen = model or local.default
    return LocalTranscriber(local.model(chosen), engines.transcriber_name, chosen)


def heard_by(transcriber: LocalTranscriber | Provider) -> str:
    """What the request log says heard the audio."""
    if isinstance(transcriber, Provider):
        return f"provider:{transcriber.name}"
    return transcriber.model


def can_transcribe(engines: Engines, providers: Providers) -> bool:
    """Some language can be transcribed: here, or by a provider."""
    return engines.transcribers is not None or bool(providers.languages())


def transcription_languages(engines: Engines, providers: Providers) -> frozenset[str]:
    """The language hints this node takes: its models' and its providers'."""
    local = engines.transcribers
    return (local.languages() if local else frozenset()) | providers.languages()


def transcription_models(engines: Engines) -> tuple[str, ...]:
    """The models a request may name, this node's default first (none without an engine:
    the providers' are chosen by language)."""
    return engines.transcribers.names if engines.transcribers is not None else ()


def remote_speaker(
    providers: Providers, voice_key: str, profile: Mapping[str, Any] | None
) -> ProviderVoice | None:
    """The provider that speaks a voice (a clone made there too), if one does; None when
    this node's engines speak it (a clone made here has its `profile`)."""
    return providers.speaker(voice_key) if profile is None else None


def cloner_for(engines: Engines, providers: Providers) -> VoiceCloner | Provider:
    """Who makes a clone: the first provider that clones, else this node's cloner. Raises
    ProviderError when there is neither."""
    provider = providers.cloner()
    if provider is not None:
        return provider
    if engines.cloner is None:
        raise ProviderError(NO_CLONER)
    return engines.cloner
