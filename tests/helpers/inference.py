"""What tests read of the inference layer beyond the product's own calls."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from bench.audio import to_16k

from voice_service.engines.manner import PLAIN, Manner
from voice_service.engines.protocols import Pcm, TranscribeOptions
from voice_service.inference.engines import Engines, SpokenChunk, load_cloner
from voice_service.inference.pool import InferencePool


def slots_held(pool: InferencePool) -> int:
    """Pool slots held by a step running (or just finished) in a thread, every capability's."""
    return sum(queue["running"] for queue in pool.queues().values())


def spoken(
    engines: Engines,
    voice_key: str,
    profile: Mapping[str, Any] | None,
    text: str,
    manner: Manner = PLAIN,
) -> Iterator[SpokenChunk]:
    """`text` spoken chunk by chunk, one after another, as the service's parts make it."""
    for speak in engines.speech_parts(voice_key, profile, text, manner=manner):
        yield speak()


def heard(engines: Engines, pcm: Pcm, language: str) -> str:
    """What the node's own Whisper hears in `pcm`, told its language."""
    assert engines.transcribers is not None
    stream = engines.transcribers.model(None).stream(to_16k(pcm), TranscribeOptions(language))
    return " ".join(segment.text for segment in stream.segments)


def restarted(engines: Engines, *names: str) -> Engines:
    """A node started afresh with the TTS engines `names`: its cloner knows no clone."""
    speakers = {name: engines.speakers[name] for name in names}
    return Engines(speakers, engines.transcribers, load_cloner(speakers))
