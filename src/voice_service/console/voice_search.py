"""The voices page's catalogue search: a part of a voice's name and a language, both from
a GET form, so that a search works without script and a URL can be shared."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from voice_service.core.models import Voice


def primary_language(tag: str) -> str:
    """ "en" of "en-US": the filter offers languages, each with its regional variants."""
    return tag.split("-")[0].lower()


def languages(voices: Iterable[Voice]) -> list[str]:
    """The languages the voices speak, for the filter's choices."""
    return sorted({primary_language(v.language) for v in voices if v.language})


@dataclass(frozen=True)
class CatalogueSearch:
    text: str = ""
    language: str = ""  # a primary language subtag, or empty for all

    @classmethod
    def of(cls, text: str, language: str, offered: Sequence[str]) -> CatalogueSearch:
        # A language not offered is ignored rather than refused, as the request log's
        # filters are: it can only come from an edited URL or a voice since removed.
        return cls(text.strip(), language if language in offered else "")

    @property
    def active(self) -> bool:
        return bool(self.text or self.language)

    def matches(self, voice: Voice) -> bool:
        return self._names(voice) and self._speaks(voice)

    def _names(self, voice: Voice) -> bool:
        return self.text.casefold() in voice.name.casefold()

    def _speaks(self, voice: Voice) -> bool:
        # A voice without a language speaks any: it is a candidate for every language.
        if not self.language or voice.language is None:
            return True
        return primary_language(voice.language) == self.language

    def apply(self, voices: Iterable[Voice]) -> list[Voice]:
        return [voice for voice in voices if self.matches(voice)]
