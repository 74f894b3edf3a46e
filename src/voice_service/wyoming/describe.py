"""`describe` → `info`: what the listener's key may use, as Wyoming programs.

Text to speech lists the shared catalogue and the organization's clones, each named by its
voice id (stable across restarts and nodes), described by its name, with its language.
Speech to text lists the transcription model and the languages it takes. A program the key
may not use (a scope it lacks, a service disabled for it), or that this node cannot serve
(no transcription engine or provider), is left out.
"""

from __future__ import annotations

from wyoming.info import AsrModel, AsrProgram, Attribution, Info, TtsProgram, TtsVoice

from voice_service import __version__
from voice_service.core.models import Voice
from voice_service.core.vocabulary import Scope, Service
from voice_service.inference.resolver import can_transcribe
from voice_service.tenancy.principal import Principal
from voice_service.transcription.service import known_languages, offered_model_list
from voice_service.voices.listing import clones_of
from voice_service.web.context import AppContext

PROGRAM = "voice-service"
ATTRIBUTION = Attribution(name="Voice Service", url="https://github.com/voice-service")


def allows(principal: Principal, scope: Scope, service: Service) -> bool:
    return (
        principal.missing_scope_message(scope) is None
        and principal.disabled_message(service) is None
    )


async def service_info(context: AppContext, principal: Principal) -> Info:
    info = Info()
    if allows(principal, Scope.TEXT_TO_SPEECH, Service.TEXT_TO_SPEECH):
        speech = await _speech_program(context, principal)
        if speech.voices:  # a node with no engine or provider of speech has none
            info.tts.append(speech)
    assert context.engines is not None
    transcribes = can_transcribe(context.engines, context.providers)
    if transcribes and allows(principal, Scope.SPEECH_TO_TEXT, Service.SPEECH_TO_TEXT):
        info.asr.append(_transcription_program(context))
    return info


async def usable_voices(context: AppContext, principal: Principal) -> list[Voice]:
    """The catalogue, in its order, then the organization's clones."""
    assert context.voice_listing is not None
    clones = await clones_of(context, principal.org_id)
    return [*context.voice_listing.catalogue, *clones]


async def _speech_program(context: AppContext, principal: Principal) -> TtsProgram:
    usable = await usable_voices(context, principal)
    # A clone speaks its base voice's language (Home Assistant lists voices by language).
    spoken = {voice.engine_voice: voice.language for voice in usable if voice.org_id is None}
    voices = [_voice(voice, voice.language or spoken.get(voice.engine_voice)) for voice in usable]
    return TtsProgram(
        name=PROGRAM,
        attribution=ATTRIBUTION,
        installed=True,
        description="Voice Service text to speech",
        version=__version__,
        voices=voices,
        supports_synthesize_streaming=True,
    )


def _voice(voice: Voice, language: str | None) -> TtsVoice:
    return TtsVoice(
        name=voice.id,
        attribution=ATTRIBUTION,
        installed=True,
        description=voice.name,
        version=None,
        languages=[language] if language else [],
    )


def _transcription_program(context: AppContext) -> AsrProgram:
    """One model per model this node offers (a `transcribe` event's `name` chooses it), the
    default first; one named "provider" when providers alone transcribe."""
    offered = offered_model_list(context)
    models = [
        AsrModel(
            name=model.name,
            attribution=ATTRIBUTION,
            installed=True,
            description=f"Voice Service speech to text, {model.engine} {model.name}"
            + (" (the default)" if model.default else ""),
            version=__version__,
            languages=sorted(model.languages),
        )
        for model in offered
    ] or [
        AsrModel(
            name="provider",
            attribution=ATTRIBUTION,
            installed=True,
            description="Voice Service speech to text",
            version=__version__,
            languages=sorted(known_languages(context)),
        )
    ]
    return AsrProgram(
        name=PROGRAM,
        attribution=ATTRIBUTION,
        installed=True,
        description="Voice Service speech to text",
        version=__version__,
        models=models,
        supports_transcript_streaming=True,
    )
