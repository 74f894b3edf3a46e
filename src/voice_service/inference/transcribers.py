"""The speech-to-text models a node offers (`VOICE_SERVICE_WHISPER_MODELS`), each loaded on
its first use and unloaded when idle or when another needs its room in the memory budget.

A model is held from the moment a transcription starts on it until its last segment is
decoded (or the transcription is closed), and a held model is never unloaded. The budget
counts each loaded model's files on disk, the loader's own measure of what it holds."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voice_service.core.errors import InvalidRequest, ModelsInUse
from voice_service.engines.protocols import (
    EngineError,
    Segment,
    SpeechToText,
    TranscribeOptions,
    TranscriptStream,
)
from voice_service.models.catalogue import model_named
from voice_service.models.store import model_dir, problems, size_problems
from voice_service.settings import CUSTOM_WHISPER, Settings

logger = logging.getLogger(__name__)

# The packaged model's name: the catalogue's entry for the same files.
PACKAGED = "base"
# How long a request refused for want of room in the budget is told to wait: about one
# transcription's time, after which a model in use is usually free to unload.
RETRY_AFTER_SECONDS = 5


class ModelDamaged(EngineError):
    """A pulled model whose files differ from its catalogue entry: one line naming the file
    and the command that repairs it."""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """One model the operator offers, and where its files are."""

    name: str
    directory: Path | None  # None: the packaged model, joined into the data dir at load
    bytes: int  # its files' size, what the memory budget counts
    pulled: bool = False  # its files are checked against the catalogue at its first load

    @classmethod
    def of(cls, name: str, models_dir: Path, custom: Path | None) -> ModelChoice:
        """The model `VOICE_SERVICE_WHISPER_MODELS` names `name` (checked by the settings):
        `custom` is `custom`'s directory; another is pulled into `models_dir`, except the
        packaged one when it is not."""
        if name == CUSTOM_WHISPER:
            assert custom is not None
            files = [path for path in custom.glob("*") if path.is_file()]
            return cls(name, custom, sum(path.stat().st_size for path in files))
        entry = model_named(name)
        directory = model_dir(models_dir, entry)
        if name == PACKAGED and not directory.is_dir():
            return cls(name, None, entry.size)
        return cls(name, directory, entry.size, pulled=True)


def offered_choices(settings: Settings) -> list[ModelChoice]:
    """The models `VOICE_SERVICE_WHISPER_MODELS` offers, the default first."""
    return [
        ModelChoice.of(name, settings.resolved_models_dir, settings.whisper_model_dir)
        for name in settings.whisper_model_names
    ]


async def unload_idle_forever(transcribers: Transcribers) -> None:
    """`unload_idle` every so often, at least twice per idle time: a task for the node's
    life."""
    every = max(0.5, min(transcribers.idle_seconds / 2, 30.0))
    while True:
        await asyncio.sleep(every)
        # In a thread: the last reference to a model goes there, and freeing it takes time.
        await asyncio.to_thread(transcribers.unload_idle)


def start_problem(choice: ModelChoice) -> str | None:
    """What keeps a node from offering `choice`, in one line with the command that mends
    it: a model not pulled, or a file missing or of another size than its receipt says
    (no file read: hashes are checked at the model's first load)."""
    if choice.directory is None:
        return None  # the packaged model, checked as it is joined
    found = size_problems(choice.directory)
    if choice.name == CUSTOM_WHISPER and found is None:
        if not (choice.directory / "model.bin").is_file():
            return f"no CTranslate2 model.bin in WHISPER_MODEL_DIR ({choice.directory})"
        return None  # converted by the operator: no receipt to check it against
    if found is None:
        return (
            f"{choice.name} is not pulled into {choice.directory.parent}; "
            f"run: voice-service models pull {choice.name}"
        )
    name, wrong = found
    if wrong:
        return f"the {name} model's {wrong[0]}; repair: voice-service models pull {name}"
    return None


@dataclass(slots=True)
class _Loaded:
    choice: ModelChoice
    ready: threading.Event = field(default_factory=threading.Event)
    engine: SpeechToText | None = None
    failure: BaseException | None = None
    holds: int = 0
    last_used: float = 0.0


class Transcribers:
    """The models offered, by name, the first the default; thread-safe: models load in the
    inference worker that first needs them."""

    def __init__(
        self,
        choices: Sequence[ModelChoice],
        load: Callable[[Path | None], SpeechToText],
        *,
        budget_bytes: int,
        idle_seconds: float,
        engine: str = "whisper",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._choices = {choice.name: choice for choice in choices}
        self._engine = engine  # the engine's name, for the log
        self.default = choices[0].name
        self._load = load
        self._budget = budget_bytes
        self.idle_seconds = idle_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._shelf: dict[str, _Loaded] = {}  # loaded, or loading
        self._checked: set[str] = set()  # pulled models whose files were hashed
        self._languages: frozenset[str] = frozenset()
        # The loader's own count of loads and unloads, by model.
        self.loads: Counter[str] = Counter()
        self.unloads: Counter[str] = Counter()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._choices)

    def loaded(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(name for name, held in self._shelf.items() if held.engine is not None)

    def start(self) -> None:
        """Load the default model (at the node's start): a damaged one stops the start."""
        try:
            self._languages = self.acquire(self.default).languages()
        finally:
            self.release(self.default)

    def languages(self) -> frozenset[str]:
        """The language hints the default model takes (every catalogue model takes the
        same); known once `start` has run."""
        return self._languages

    def model(self, name: str | None) -> SpeechToText:
        """Model `name` (None: the default) as a `SpeechToText` that holds it, loading it if
        need be, for as long as a transcription runs on it."""
        chosen = self.default if name is None else name
        if chosen not in self._choices:
            raise KeyError(chosen)
        return _HeldModel(self, chosen)

    def unload_idle(self) -> list[str]:
        """Unload every model but the default that nothing has used for the idle time: the
        ones unloaded."""
        now = self._clock()
        with self._lock:
            idle = [
                name
                for name, held in self._shelf.items()
                if name != self.default
                and held.engine is not None
                and held.holds == 0
                and now - held.last_used >= self.idle_seconds
            ]
            for name in idle:
                self._unload(name)
        return idle

    def acquire(self, name: str) -> SpeechToText:
        """The model, loaded (in this thread, if no other is loading it), and held until
        `release`. Raises ModelsInUse when the budget has no room for it beside the models in
        use, and ModelDamaged or EngineError when it cannot be loaded."""
        choice = self._choices[name]
        if choice.pulled and name not in self._checked:
            self._check(choice)  # before a damaged model could take another's room
        with self._lock:
            held = self._shelf.get(name)
            loading = held is None
            if held is None:
                self._make_room(choice)
                held = self._shelf[name] = _Loaded(choice)
            held.holds += 1
        if loading:
            self._load_into(held)
        else:
            held.ready.wait()
        if held.failure is not None:
            raise held.failure
        assert held.engine is not None
        return held.engine

    def release(self, name: str) -> None:
        with self._lock:
            held = self._shelf.get(name)
            if held is not None:
                held.holds -= 1
                held.last_used = self._clock()

    def _make_room(self, choice: ModelChoice) -> None:
        """Unload idle models, least recently used first, until `choice` fits the budget
        (under the lock). A model alone larger than the budget is loaded once nothing else
        is."""
        total = sum(held.choice.bytes for held in self._shelf.values())
        while self._shelf and total + choice.bytes > self._budget:
            idle = [
                held for held in self._shelf.values() if held.holds == 0 and held.engine is not None
            ]
            if not idle:
                raise ModelsInUse(RETRY_AFTER_SECONDS)
            victim = min(idle, key=lambda held: held.last_used)
            total -= victim.choice.bytes
            self._unload(victim.choice.name)

    def _unload(self, name: str) -> None:
        del self._shelf[name]
        self.unloads[name] += 1
        logger.info("Unloaded %s", self._what(name))

    def _what(self, name: str) -> str:
        return f"{self._engine} {name} (speech to text)"

    def _load_into(self, held: _Loaded) -> None:
        choice = held.choice
        try:
            logger.info("Loading %s", self._what(choice.name))
            started = time.perf_counter()
            held.engine = self._load(choice.directory)
            with self._lock:
                self.loads[choice.name] += 1
            took = time.perf_counter() - started
            logger.info("Loaded %s in %.1f s", self._what(choice.name), took)
        except BaseException as exc:
            held.failure = exc
            with self._lock:
                if self._shelf.get(choice.name) is held:
                    del self._shelf[choice.name]
            raise
        finally:
            held.ready.set()

    def _check(self, choice: ModelChoice) -> None:
        """Every file of a pulled model read and hashed against the catalogue, once per
        process: a truncated or altered file is refused before CTranslate2 reads it."""
        assert choice.directory is not None  # a pulled model's
        found = problems(choice.directory, model_named(choice.name))
        if found:
            raise ModelDamaged(
                f"the {choice.name} model's {found[0]}; repair: voice-service models pull "
                f"{choice.name}"
            )
        self._checked.add(choice.name)


class _HeldModel:
    """A model as a `SpeechToText`: `stream` holds it until the stream's segments are all
    decoded, or the stream is closed or dropped."""

    def __init__(self, transcribers: Transcribers, name: str) -> None:
        self._transcribers = transcribers
        self._name = name

    def languages(self) -> frozenset[str]:
        return self._transcribers.languages()

    def stream(
        self, audio: npt.NDArray[np.float32], options: TranscribeOptions
    ) -> TranscriptStream:
        engine = self._transcribers.acquire(self._name)
        segments = _HeldSegments(lambda: self._transcribers.release(self._name))
        try:
            language = options.language
            if language is not None and language not in engine.languages():
                raise InvalidRequest(
                    f"language: the {self._name} model does not know {language!r}.",
                    param="language",
                )
            stream = engine.stream(audio, options)
        except BaseException:
            segments.close()
            raise
        segments.segments = stream.segments
        return TranscriptStream(stream.language, segments)


class _HeldSegments(Iterator[Segment]):
    """A stream's segments, releasing the model once they end or are closed (or dropped:
    CPython closes them as soon as their last reference goes)."""

    def __init__(self, release: Callable[[], None]) -> None:
        self.segments: Iterator[Segment] = iter(())
        self._release: Callable[[], None] | None = release

    def __next__(self) -> Segment:
        try:
            return next(self.segments)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            close = getattr(self.segments, "close", None)
            if close is not None:
                close()
            release()

    def __del__(self) -> None:
        self.close()
