"""The providers file (`VOICE_SERVICE_PROVIDERS_FILE`): read once at start, every key checked.

A mistake stops the node with one line naming the file, the line and the key, so an operator
never finds out from a customer's 502 that a replica's URL has a typo.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from voice_service.engines.catalog import CLONER, LOCAL_ENGINES
from voice_service.inference.providers.wire import WIRES, CloningWire, Wire, kinds_that

ANY_LANGUAGE = "*"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_RESERVED_NAMES = frozenset({engine.name for engine in LOCAL_ENGINES} | {CLONER})


class ProvidersFileError(Exception):
    """The file cannot be used; the message says where and why, in one line."""


def _base_url(value: str) -> str:
    url = urlsplit(value)
    if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment:
        raise ValueError("each must be an http:// or https:// URL without a query")
    return value.rstrip("/")


def _kind(value: str) -> str:
    if value not in WIRES:
        expected = " or ".join(repr(kind) for kind in WIRES)
        raise PydanticCustomError(
            "literal_error", "Input should be {expected}", {"expected": expected}
        )
    return value


def _language(value: str) -> str:
    if value != ANY_LANGUAGE and not re.fullmatch(r"[a-z]{2}", value):
        raise ValueError('a language is an ISO 639-1 code such as "fr", or "*" for any')
    return value


Text = Annotated[str, Field(min_length=1, max_length=200)]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProviderVoice(_Table):
    voice: Text  # the provider's own name or id for it
    name: Text  # as GET /voices shows it
    language: Annotated[str, AfterValidator(_language)] | None = None


class TranscriptionSection(_Table):
    model: Text | None = None  # sent as `model` (`model_id` to ElevenLabs)
    languages: Annotated[list[Annotated[str, AfterValidator(_language)]], Field(min_length=1)] = [
        ANY_LANGUAGE
    ]
    # It tells speakers apart itself (ElevenLabs' `diarize`, OpenAI's `diarized_json`): a
    # diarized request it can take whole takes its speakers instead of this node's diarizer.
    diarize: bool = False
    # Sent as `model` when an OpenAI-compatible provider is asked for speakers (OpenAI
    # diarizes with a model of its own); the kind's `diarizing_model` if not given.
    diarize_model: Text | None = None


class SpeechSection(_Table):
    model: Text | None = None
    voices: Annotated[list[ProviderVoice], Field(min_length=1)]


class CloningSection(_Table):
    model: Text | None = None  # unused by ElevenLabs' instant clones; kept for symmetry


class ProviderConfig(_Table):
    name: str
    kind: Annotated[str, AfterValidator(_kind)]
    base_urls: Annotated[list[Annotated[str, AfterValidator(_base_url)]], Field(min_length=1)] | (
        None
    ) = None
    api_key_env: str | None = None
    timeout_seconds: float = Field(60.0, gt=0, le=3600)
    max_concurrency: int = Field(16, ge=1, le=10_000)
    transcription: TranscriptionSection | None = None
    speech: SpeechSection | None = None
    cloning: CloningSection | None = None

    @property
    def urls(self) -> tuple[str, ...]:
        return tuple(self.base_urls) if self.base_urls else WIRES[self.kind].default_base_urls


class _File(_Table):
    provider: list[ProviderConfig] = []


def load_providers(path: Path, environ: Mapping[str, str] | None = None) -> list[ResolvedProvider]:
    """Every provider of the file at `path`, checked; raises `ProvidersFileError`."""
    env = os.environ if environ is None else environ
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProvidersFileError(f"{path}: cannot be read: {exc}") from None
    try:
        raw = tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise ProvidersFileError(f"{path}: not valid TOML: {exc}") from None
    try:
        parsed = _File.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = _Locator(source).line_of(error["loc"])
        key = _dotted(error["loc"])
        raise ProvidersFileError(f"{path}, line {where}: {key}: {_message(error)}") from None
    locate = _Locator(source)
    providers: list[ResolvedProvider] = []
    for index, config in enumerate(parsed.provider):
        try:
            providers.append(_resolve(config, env, [p.config.name for p in providers]))
        except _Invalid as exc:
            line = locate.line_of(("provider", index, *exc.key.split(".")))
            raise ProvidersFileError(
                f"{path}, line {line}: provider[{index}].{exc.key}: {exc}"
            ) from None
    return providers


class ResolvedProvider(BaseModel):
    """A provider's settings and its key, read from the environment."""

    model_config = ConfigDict(frozen=True)
    config: ProviderConfig
    api_key: str | None


class _Invalid(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _resolve(
    config: ProviderConfig, env: Mapping[str, str], earlier: Sequence[str]
) -> ResolvedProvider:
    if not _NAME.fullmatch(config.name):
        raise _Invalid("name", "lowercase letters, digits, - and _, at most 63, e.g. gpu-whisper")
    if config.name in _RESERVED_NAMES:
        raise _Invalid("name", f"{config.name!r} is a local engine's name; choose another")
    if config.name in earlier:
        raise _Invalid("name", f"{config.name!r} is used by an earlier provider; names are unique")
    if config.transcription is None and config.speech is None and config.cloning is None:
        raise _Invalid(
            "name",
            "give it at least one of [provider.transcription], "
            "[provider.speech], [provider.cloning]",
        )
    wire = WIRES[config.kind]
    if config.cloning is not None and not issubclass(wire, CloningWire):
        raise _Invalid("cloning", f"only {kinds_that(_clones)} clones voices")
    section = config.transcription
    if section and section.diarize_model and (not wire.diarizing_model or not section.diarize):
        raise _Invalid(
            "transcription.diarize_model",
            f"only {kinds_that(_diarizes_by_model)} with diarize = true is asked for speakers "
            "by another model",
        )
    if config.speech is not None:
        seen: set[str] = set()
        for voice in config.speech.voices:
            if voice.voice in seen:
                raise _Invalid("speech.voices", f"voice {voice.voice!r} is listed twice")
            seen.add(voice.voice)
    if config.api_key_env is not None and any(urlsplit(url).username for url in config.urls):
        # httpx sends a URL's user:password as Basic auth, in place of the key's header.
        raise _Invalid(
            "base_urls", "a URL with user:password cannot be used with api_key_env; use one"
        )
    api_key = None
    if config.api_key_env is not None:
        api_key = env.get(config.api_key_env)
        if not api_key:
            raise _Invalid("api_key_env", f"the variable {config.api_key_env} is not set")
    return ResolvedProvider(config=config, api_key=api_key)


def _clones(wire: type[Wire]) -> bool:
    return issubclass(wire, CloningWire)


def _diarizes_by_model(wire: type[Wire]) -> bool:
    return wire.diarizing_model is not None


def _dotted(loc: Sequence[int | str]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts[-1] = f"{parts[-1]}[{part}]" if parts else f"[{part}]"
        elif "," not in part and "[" not in part:  # pydantic's union branches ("list[str]")
            parts.append(part)
    return ".".join(parts)


def _message(error: Any) -> str:
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


class _Locator:
    """The line of a key in the file: tomllib keeps no positions, so the source is searched
    for the n-th [[provider]] table, then the key's own table, then the key."""

    def __init__(self, source: str) -> None:
        self._lines = source.splitlines()

    def line_of(self, loc: Sequence[int | str]) -> int:
        names = [part for part in loc if isinstance(part, str) and part.isidentifier()]
        index = next((part for part in loc[1:2] if isinstance(part, int)), None)
        if not names or names[0] != "provider" or index is None:
            return 1
        start, end = self._provider_span(index)
        line = start
        for name in names[1:]:
            table = self._find(rf"\[\s*provider\.{name}\s*\]", start, end)
            if table is not None:
                start, line = table, table
                continue
            key = self._find(rf"{name}\s*=", start, end)
            if key is not None:
                line = key
            break
        return line + 1

    def _provider_span(self, index: int) -> tuple[int, int]:
        headers = [
            number
            for number, text in enumerate(self._lines)
            if re.match(r"\s*\[\[\s*provider\s*\]\]", text)
        ]
        if index >= len(headers):
            return 0, len(self._lines)
        end = headers[index + 1] if index + 1 < len(headers) else len(self._lines)
        return headers[index], end

    def _find(self, pattern: str, start: int, end: int) -> int | None:
        for number in range(start, end):
            if re.match(rf"\s*{pattern}", self._lines[number]):
                return number
        return None
