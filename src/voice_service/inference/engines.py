"""The engines a node runs in its own process, loaded once at start and shared by every
request (its speech-to-text models are loaded as requests name them: `transcribers`).

Which ones is the operator's choice among the catalogue's entries (`engines.catalog`); each
engine's module is imported only when it is loaded. Text-to-speech engines are found by the
prefix of a voice key ("piper:en_US-joe-medium" is Piper's).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import numpy as np

from voice_service.audio.tempo import stretched
from voice_service.engines.catalog import (
    CLONE_BASE_VOICE,
    CLONER,
    EngineOptions,
    engine_of,
    local_engine,
)
from voice_service.engines.chunking import FIRST_CHUNK_CHARS, speakable, split_text
from voice_service.engines.continuity import Context, said_in_context
from voice_service.engines.manner import PLAIN, SPEEDS, Manner
from voice_service.engines.pronunciation import NO_LEXICON, Lexicon, Rewrite, pronounced
from voice_service.engines.protocols import (
    EngineVoice,
    Pcm,
    SpeechToText,
    TextToSpeech,
    UnknownVoice,
    VoiceCloner,
)
from voice_service.engines.ssml import Script
from voice_service.inference.transcribers import Transcribers, offered_choices
from voice_service.models.catalogue import model_named
from voice_service.models.store import voice_model
from voice_service.settings import Settings

if TYPE_CHECKING:
    from voice_service.engines.diarization import Diarizer
    from voice_service.engines.speaker_embedding import SpeakerEncoder
    from voice_service.engines.whisper import WhisperEngine
    from voice_service.engines.world import WorldCloner

T = TypeVar("T")
P = ParamSpec("P")

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SpokenChunk:
    text: str  # the piece of the text (whitespace around it left out)
    pcm: Pcm


@dataclass(frozen=True, slots=True)
class Engines:
    speakers: Mapping[str, TextToSpeech]  # by voice-key prefix, in catalogue order
    transcribers: Transcribers | None  # None when STT_ENGINES is empty
    cloner: VoiceCloner | None  # None when its base voice's engine is not loaded
    transcriber_name: str = "whisper"  # the transcriber's entry in the catalogue
    diarizer: Diarizer | None = None  # `load` gives every node one

    @classmethod
    def load(cls, settings: Settings) -> Engines:
        options = engine_options(settings)
        speakers = {
            name: cast(
                TextToSpeech,
                load_announced(f"{name} (text to speech)", local_engine(name).load, options),
            )
            for name in settings.tts_engine_names
        }
        names = settings.stt_engine_names
        # Its default model is loaded now, and announced as the others are when they load.
        transcribers = load_transcribers(settings, names[0]) if names else None
        # One speaker encoder (12 MB, safe from many threads) for the cloner and the diarizer.
        encoder = load_announced("the speaker encoder", _load_encoder)
        cloner = None  # without its base voice's engine, none to announce
        if engine_of(CLONE_BASE_VOICE) in speakers:
            cloner = load_announced("the voice cloner", load_cloner, speakers, encoder)
        return cls(
            speakers=speakers,
            transcribers=transcribers,
            cloner=cloner,
            transcriber_name=names[0] if names else "",
            diarizer=load_announced("the diarizer", load_diarizer, settings, encoder),
        )

    def catalogue(self) -> list[EngineVoice]:
        return [voice for engine in self.speakers.values() for voice in engine.voices()]

    def speech_parts(
        self,
        voice_key: str,
        profile: Mapping[str, Any] | None,
        text: str,
        *,
        quick_start: bool = False,
        manner: Manner = PLAIN,
        rewrite: Rewrite | None = None,
    ) -> list[Callable[[], SpokenChunk]]:
        """`text` in chunks (`chunking.split_text`), each a call that speaks it, so memory
        stays bounded whatever its length and each chunk can be sent as soon as it is made;
        in a clone's voice when its `profile` is given; with a short first chunk for a
        `quick_start`; in the `manner` asked: its speed, the first chunk going on from its
        context's text before and the last into its text after (`continuity`), its lexicon's
        words said as its rules say; each chunk read as `rewrite` (of `text`: SSML's) says.
        The calls may run at once on several threads. The voice is looked up by the first
        call made, which raises `UnknownVoice` before any work."""
        context = manner.context
        speaker = functools.cache(
            lambda: self.chunk_speaker(
                voice_key, profile, manner.speed, manner.lexicon, manner.language
            )
        )
        chunks = split_text(text, first_chars=FIRST_CHUNK_CHARS if quick_start else None)
        read = _chunk_rewrites(text, chunks, rewrite)
        return [
            functools.partial(
                _spoken,
                speaker,
                chunk,
                Context(
                    context.before if index == 0 else "",
                    context.after if index == len(chunks) - 1 else "",
                ),
                read[index],
            )
            for index, chunk in enumerate(chunks)
        ]

    def script_parts(
        self,
        voice_key: str,
        profile: Mapping[str, Any] | None,
        script: Script,
        *,
        quick_start: bool = False,
        manner: Manner = PLAIN,
    ) -> list[Callable[[], SpokenChunk]]:
        """`speech_parts` of each stretch of `script`, at its rate, and its pause as silence
        after its last chunk (before the next's first, for a stretch that says nothing);
        the request's context goes before the first stretch and after the last."""
        planned: list[_Planned] = []
        pending = 0.0  # silence not yet put beside a chunk
        last = len(script.stretches) - 1
        for index, stretch in enumerate(script.stretches):
            context = Context(
                manner.context.before if index == 0 else "",
                manner.context.after if index == last else "",
            )
            speed = min(max(manner.speed * stretch.rate, SPEEDS[0]), SPEEDS[1])
            said = self.speech_parts(
                voice_key,
                profile,
                stretch.rewrite.written,
                quick_start=quick_start and not planned,
                manner=dataclasses.replace(manner, speed=speed, context=context),
                rewrite=stretch.rewrite,
            )
            if not said:
                pending += stretch.pause
                continue
            broken = bool(planned) and planned[-1].after > 0
            stretch_parts = [_Planned(part) for part in said]
            stretch_parts[0].before, stretch_parts[0].after_break = pending, broken or pending > 0
            stretch_parts[-1].after = stretch.pause
            pending = 0.0
            planned += stretch_parts
        if planned:
            planned[-1].after += pending
        return [
            functools.partial(_with_breaks, p.part, p.before, p.after, p.after_break)
            if p.before or p.after or p.after_break
            else p.part
            for p in planned
        ]

    def clone_languages(self, profile: Mapping[str, Any]) -> tuple[str, ...]:
        """The languages a clone made here speaks on this node (none without a cloner)."""
        return () if self.cloner is None else self.cloner.languages(profile)

    @staticmethod
    def speaker_name(voice_key: str, profile: Mapping[str, Any] | None) -> str:
        """The engine that speaks for `voice_key` (as `chunk_speaker` picks it)."""
        return CLONER if profile is not None else engine_of(voice_key)

    def chunk_speaker(
        self,
        voice_key: str,
        profile: Mapping[str, Any] | None,
        speed: float = 1.0,
        lexicon: Lexicon = NO_LEXICON,
        language: str | None = None,
    ) -> Callable[[str], Pcm]:
        """What says a chunk in the voice, `speed` times as fast: the engine's own pace as
        near `speed` as it reaches (`TextToSpeech.speeds`), the rest time-stretched; the
        words `lexicon` has rules for said as they say; a clone in `language` (one of
        `clone_languages`; None: its base's own)."""
        if profile is not None:  # a clone: the base voice converted toward the sample
            # The profile measures only the sample, so clones survive a change of base voice.
            if self.cloner is None:
                raise UnknownVoice(voice_key)
            native, rest = _split_speed(speed, self.cloner.speeds)
            say = self.cloner.speaker(profile, native, language)
        else:
            engine = self.speakers.get(engine_of(voice_key))
            if engine is None or not any(voice.key == voice_key for voice in engine.voices()):
                raise UnknownVoice(voice_key)
            native, rest = _split_speed(speed, engine.speeds)
            say = functools.partial(engine.synthesize, voice_key, speed=native)
        say = pronounced(say, lexicon)
        return say if rest == 1.0 else lambda chunk: stretched(say(chunk), rest)


def _split_speed(speed: float, reached: tuple[float, float]) -> tuple[float, float]:
    """`speed` as the nearest an engine reaches, times what is left to stretch."""
    native = min(max(speed, reached[0]), reached[1])
    return native, speed / native


def load_announced(what: str, load: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`load(...)`, logged as it starts and once done with the seconds it took: the models
    take seconds to load (more on a first start), and a start that said nothing meanwhile
    looked hung."""
    logger.info("Loading %s", what)
    started = time.perf_counter()
    loaded = load(*args, **kwargs)
    logger.info("Loaded %s in %.1f s", what, time.perf_counter() - started)
    return loaded


# Below this (of 32,767) a voice's edge is quiet: what a break's silence replaces.
_QUIET = 500
_EDGE_SECONDS = 0.02


def _chunk_rewrites(text: str, chunks: list[str], rewrite: Rewrite | None) -> list[Rewrite | None]:
    """The part of `rewrite` each chunk is (chunks are `text`'s pieces, in order)."""
    if rewrite is None or not rewrite.spans:
        return [None] * len(chunks)
    source = speakable(text)  # what was chunked: same length, same positions
    parts: list[Rewrite | None] = []
    done = 0
    for chunk in chunks:
        at = source.find(chunk, done)
        parts.append(rewrite.part(at, at + len(chunk)))
        done = at + len(chunk)
    return parts


def _spoken(
    speaker: Callable[[], Callable[[str], Pcm]],
    chunk: str,
    context: Context,
    rewrite: Rewrite | None,
) -> SpokenChunk:
    if rewrite is None:
        return SpokenChunk(chunk, said_in_context(speaker(), chunk, context))
    pcm = said_in_context(speaker(), rewrite.spoken, context)
    return SpokenChunk(chunk, dataclasses.replace(pcm, word_times=rewrite.word_times(pcm)))


@dataclass(slots=True)
class _Planned:
    """A chunk of a script, with the silence a break puts before or after it."""

    part: Callable[[], SpokenChunk]
    before: float = 0.0
    after: float = 0.0
    after_break: bool = False  # the chunk before it ended with a break


def _with_breaks(
    part: Callable[[], SpokenChunk], before: float, after: float, after_break: bool
) -> SpokenChunk:
    """`part`'s chunk with `before` and `after` seconds of silence around it, in place of
    the quiet the voice leaves at an edge beside a break: a break lasts what it says."""
    spoken = part()
    pcm = spoken.pcm
    loud = _loud_edges(pcm)
    first = loud[0] if loud and after_break else 0
    stop = loud[1] if loud and after else pcm.samples.size
    rate = pcm.sample_rate
    shift = before - first / rate
    end = before + (stop - first) / rate
    times = tuple(
        (min(max(start + shift, before), end), min(max(finish + shift, before), end))
        for start, finish in pcm.word_times
    )
    audio = np.concatenate(
        [
            np.zeros(round(before * rate), dtype=np.int16),
            pcm.samples[first:stop],
            np.zeros(round(after * rate), dtype=np.int16),
        ]
    )
    return SpokenChunk(spoken.text, Pcm(audio, rate, times))


def _loud_edges(pcm: Pcm) -> tuple[int, int] | None:
    """Where the voice's sound starts and stops (a few milliseconds kept either side, for
    its onset and decay); None for silence."""
    loud = np.flatnonzero(np.abs(pcm.samples.astype(np.int32)) > _QUIET)
    if not loud.size:
        return None
    margin = round(_EDGE_SECONDS * pcm.sample_rate)
    return max(0, int(loud[0]) - margin), min(pcm.samples.size, int(loud[-1]) + 1 + margin)


def engine_options(settings: Settings) -> EngineOptions:
    return EngineOptions(
        data_dir=settings.data_dir,
        piper_voices_dir=settings.piper_voices_dir,
        piper_voice_files=tuple(
            voice_model(settings.resolved_models_dir, model_named(name))
            for name in settings.piper_voice_names
        ),
        whisper_model_dir=settings.whisper_model_dir,
        whisper_device=settings.whisper_device,
        whisper_compute_type=settings.whisper_compute_type,
        pool_size=settings.pool_size,
    )


def load_cloner(
    speakers: Mapping[str, TextToSpeech], encoder: SpeakerEncoder | None = None
) -> WorldCloner | None:
    """The cloner over every loaded engine's clone bases, the default base first; none
    without the default."""
    default = speakers.get(engine_of(CLONE_BASE_VOICE))
    if default is None or CLONE_BASE_VOICE not in default.clone_bases():
        return None
    from voice_service.engines.world import BaseVoice, WorldCloner
    from voice_service.engines.world.base_profiles import PROFILES
    from voice_service.engines.world.base_speech import shipped

    bases = [BaseVoice.of(CLONE_BASE_VOICE, default)]
    bases += [
        BaseVoice.of(key, engine)
        for engine in speakers.values()
        for key in engine.clone_bases()
        if key != CLONE_BASE_VOICE
    ]
    return WorldCloner(bases, encoder or _load_encoder(), PROFILES, shipped())


def _load_encoder() -> SpeakerEncoder:
    from voice_service.engines.speaker_embedding import SpeakerEncoder

    return SpeakerEncoder()


def load_diarizer(settings: Settings, encoder: SpeakerEncoder | None = None) -> Diarizer:
    """The node's diarizer (every node has one, whichever engine or provider transcribes):
    with the operator's speaker model where one is set."""
    from voice_service.engines.diarization import Diarizer, VoiceModel
    from voice_service.engines.speaker_model import SpeakerModel

    voices = None
    if settings.speaker_model is not None:
        voices = VoiceModel(
            SpeakerModel(settings.speaker_model),
            settings.speaker_model_threshold,
            settings.speaker_model_known_similarity,
        )
    return Diarizer(encoder or _load_encoder(), voices=voices)


def load_transcribers(settings: Settings, name: str = "whisper") -> Transcribers:
    """The models `WHISPER_MODELS` offers, the default loaded (a damaged one raises)."""
    transcribers = Transcribers(
        offered_choices(settings),
        functools.partial(_load_model, settings, name),
        budget_bytes=settings.model_memory_mb * 1_000_000,
        idle_seconds=settings.model_idle_seconds,
        engine=name,
    )
    transcribers.start()
    return transcribers


def load_transcriber(settings: Settings, name: str = "whisper") -> SpeechToText:
    """The default model alone, without the budget's bookkeeping."""
    default, *_ = offered_choices(settings)
    return _load_model(settings, name, default.directory)


def _load_model(settings: Settings, name: str, directory: Path | None) -> SpeechToText:
    """Engine `name` on the model in `directory` (None: the packaged one)."""
    options = dataclasses.replace(engine_options(settings), whisper_model_dir=directory)
    return cast(SpeechToText, local_engine(name).load(options))


def load_whisper(settings: Settings) -> WhisperEngine:
    """The local Whisper as the node loads it (benchmarks and tests use its extras)."""
    from voice_service.engines.whisper import WhisperEngine

    return cast(WhisperEngine, load_transcriber(settings, "whisper"))
