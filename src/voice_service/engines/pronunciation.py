"""Pronunciation rules: words said as an alias, or as the phonemes a rule gives.

A `Lexicon` (the rules of the dictionaries a request names, first named first) rewrites each
chunk before an engine says it: an alias replaces the words it matches, and a phoneme rule
puts its IPA between `PHONEMES_OPEN` and `PHONEMES_CLOSE`, which every engine reads as
phonemes (`protocols.phoneme_pieces`). The audio's word times are then mapped back onto the
words as written, so timestamps and continuity follow the customer's text, not the aliases.

Matching is PLS's: a rule matches its text exactly (or ignoring case where it says so), as
whole words unless it says otherwise; at each place the longest match wins, and of rules
for the same text the first dictionary's.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from voice_service.engines.alignment import character_times
from voice_service.engines.protocols import PHONEMES_CLOSE, PHONEMES_OPEN, Pcm, WordTime


class Alphabet(StrEnum):
    IPA = "ipa"
    CMU_ARPABET = "cmu-arpabet"


# The names SSML's and PLS's `alphabet` give them (PLS files write Arpabet "x-cmu").
ALPHABET_NAMES = {
    "ipa": Alphabet.IPA,
    "x-cmu": Alphabet.CMU_ARPABET,
    "cmu-arpabet": Alphabet.CMU_ARPABET,
}


class InvalidPhonemes(ValueError):
    """A phoneme rule's phonemes are not of its alphabet; the message names the symbol."""


# CMU Arpabet (the CMU Pronouncing Dictionary's symbols) as espeak-ng writes the sounds in
# IPA for American English; a vowel's stress digit (1 primary, 2 secondary, 0 none) puts
# the stress mark before it, as espeak-ng does.
_ARPABET = {
    "AA": "ɑː",
    "AE": "æ",
    "AH": "ʌ",
    "AO": "ɔː",
    "AW": "aʊ",
    "AY": "aɪ",
    "B": "b",
    "CH": "tʃ",
    "D": "d",
    "DH": "ð",
    "EH": "ɛ",
    "ER": "ɜː",
    "EY": "eɪ",
    "F": "f",
    "G": "ɡ",
    "HH": "h",
    "IH": "ɪ",
    "IY": "iː",
    "JH": "dʒ",
    "K": "k",
    "L": "l",
    "M": "m",
    "N": "n",
    "NG": "ŋ",
    "OW": "oʊ",
    "OY": "ɔɪ",
    "P": "p",
    "R": "ɹ",
    "S": "s",
    "SH": "ʃ",
    "T": "t",
    "TH": "θ",
    "UH": "ʊ",
    "UW": "uː",
    "V": "v",
    "W": "w",
    "Y": "j",
    "Z": "z",
    "ZH": "ʒ",
}
# Unstressed, these two vowels are schwas.
_ARPABET_UNSTRESSED = {"AH": "ə", "ER": "ɚ"}
_STRESS = {"1": "ˈ", "2": "ˌ"}
_STRESS_MARKS = frozenset(_STRESS.values())
_VOWELS = frozenset("aeiouyæɐɑɒɔəɘɚɛɜɝɞɤɨɪɯɵɶʉʊʌʏøœᵻ")

# Other ways of writing what espeak-ng's IPA writes one way: ASCII stand-ins, single-symbol
# affricates, and the r-coloured vowel as American dictionaries print it.
_IPA_SPELLINGS = (
    ("g", "ɡ"),
    ("'", "ˈ"),
    ("ʧ", "tʃ"),
    ("ʤ", "dʒ"),
    ("ɝ", "ɜː"),
    (":", "ː"),
)
# Delimiters, syllable breaks and ties: no sound of their own.
_IPA_SILENT = frozenset("/[]().‿͡")
_IPA_MAX = 200


def ipa_of(phonemes: str, alphabet: Alphabet) -> str:
    """`phonemes` of `alphabet` as espeak-ng's IPA: what the engines are given. Raises
    `InvalidPhonemes` for Arpabet that is not Arpabet, or IPA that is not IPA at all."""
    if alphabet is Alphabet.CMU_ARPABET:
        return _ipa_of_arpabet(phonemes)
    text = unicodedata.normalize("NFD", phonemes)
    for written, espeak in _IPA_SPELLINGS:
        text = text.replace(written, espeak)
    text = " ".join("".join(char for char in text if char not in _IPA_SILENT).split())
    if not text or len(text) > _IPA_MAX:
        raise InvalidPhonemes(f"IPA must have 1 to {_IPA_MAX} symbols: {phonemes!r}")
    for char in text:
        if char.isdigit() or char in (PHONEMES_OPEN, PHONEMES_CLOSE) or not char.isprintable():
            raise InvalidPhonemes(f"{char!r} is not an IPA symbol (in {phonemes!r})")
    return _stressed_vowels(text)


def _stressed_vowels(ipa: str) -> str:
    """`ipa` with each stress mark moved from the start of its syllable to its vowel, where
    espeak-ng writes it and the voices learned it ("ˈtɑːm" as "tˈɑːm"; said as written,
    Whisper heard "at home")."""
    out: list[str] = []
    held = ""
    for char in ipa:
        if char in _STRESS_MARKS:
            held = char
        elif char in _VOWELS:
            out.append(held + char)
            held = ""
        else:
            out.append(char)
    return "".join(out) + held


def _ipa_of_arpabet(phonemes: str) -> str:
    """Space-separated Arpabet ("T AH0 M EY1 T OW2") as one word of IPA."""
    sounds = []
    for symbol in phonemes.split():
        base = symbol.upper().rstrip("012")
        stress = symbol[len(base) :]
        if base not in _ARPABET or len(stress) > 1:
            raise InvalidPhonemes(f"{symbol!r} is not a CMU Arpabet symbol")
        sound = _ARPABET_UNSTRESSED.get(base, _ARPABET[base]) if stress == "0" else _ARPABET[base]
        sounds.append(_STRESS.get(stress, "") + sound)
    if not sounds or len(sounds) > _IPA_MAX:
        raise InvalidPhonemes(f"CMU Arpabet must have 1 to {_IPA_MAX} symbols: {phonemes!r}")
    return "".join(sounds)


@dataclass(frozen=True, slots=True)
class Rule:
    """Say `text` as `alias`, or as `phonemes` (espeak-ng's IPA, from `ipa_of`)."""

    text: str
    alias: str | None = None
    phonemes: str | None = None
    case_sensitive: bool = True
    word_boundaries: bool = True

    @property
    def spoken(self) -> str:
        if self.phonemes is not None:
            return PHONEMES_OPEN + self.phonemes + PHONEMES_CLOSE
        return self.alias or ""


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"  # "" (the text's edge) is not


@dataclass(slots=True)
class _Entry:
    """The rules for one text, ignoring case; each with its place among all the rules."""

    exact: dict[str, tuple[int, Rule]]  # case-sensitive ones, by their text
    folded: tuple[int, Rule] | None = None  # the first that ignores case


# Rules by their length, then by their text in lower case.
_Table = dict[int, dict[str, _Entry]]


class Lexicon:
    """Rules, found by their length and text: at each place in a text, one dictionary
    lookup per length that rules have, whatever their number or how alike they are."""

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self._rules = [rule for rule in rules if rule.text.strip()]
        self._at_words: _Table = {}
        self._anywhere: _Table = {}  # rules that match inside words too
        for order, rule in enumerate(self._rules):
            table = self._at_words if rule.word_boundaries else self._anywhere
            by_text = table.setdefault(len(rule.text), {})
            entry = by_text.setdefault(rule.text.lower(), _Entry({}))
            if rule.case_sensitive:
                entry.exact.setdefault(rule.text, (order, rule))  # the first dictionary's
            elif entry.folded is None:
                entry.folded = (order, rule)
        self._lengths = sorted({*self._at_words, *self._anywhere}, reverse=True)
        self._aliases: Lexicon | None = None

    def __len__(self) -> int:
        return len(self._rules)

    def aliased(self, text: str) -> str:
        """`text` with only the aliases said: what a provider, which reads no phonemes of
        ours, is given."""
        if self._aliases is None:
            self._aliases = Lexicon(rule for rule in self._rules if rule.phonemes is None)
        return self._aliases.rewrite(text).spoken

    def rewrite(self, text: str) -> Rewrite:
        """`text` as the rules say it."""
        replaced: list[tuple[int, int, Rule]] = []
        position = 0
        while position < len(text):
            if text[position] == PHONEMES_OPEN:  # phonemes already (SSML's): kept as they are
                closed = text.find(PHONEMES_CLOSE, position)
                position = len(text) if closed < 0 else closed + 1
                continue
            rule = self._match(text, position)
            if rule is None:
                position += 1
                continue
            replaced.append((position, position + len(rule.text), rule))
            position += len(rule.text)
        return Rewrite.of(text, replaced)

    def _match(self, text: str, position: int) -> Rule | None:
        """The longest rule that matches at `position` (of those as long, the first)."""
        inside_word = _is_word(text[position - 1 : position]) and _is_word(text[position])
        if inside_word and not self._anywhere:
            return None
        for length in self._lengths:
            end = position + length
            if end > len(text):
                continue
            found = text[position:end]
            lowered = found.lower()
            best: tuple[int, Rule] | None = None
            for table, bounded in ((self._at_words, True), (self._anywhere, False)):
                entry = table.get(length, {}).get(lowered)
                if entry is None or (bounded and not _whole_words(text, position, end)):
                    continue
                for candidate in (entry.exact.get(found), entry.folded):
                    if candidate is not None and (best is None or candidate[0] < best[0]):
                        best = candidate
            if best is not None:
                return best[1]
        return None


def _whole_words(text: str, start: int, end: int) -> bool:
    """`text[start:end]` neither starts nor ends inside a word."""
    before = _is_word(text[start - 1 : start]) and _is_word(text[start])
    after = _is_word(text[end : end + 1]) and _is_word(text[end - 1])
    return not before and not after


NO_LEXICON = Lexicon()

# Where a span of the text was replaced: its start and end as written, then as spoken.
_Span = tuple[int, int, int, int]
_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Rewrite:
    written: str
    spoken: str
    spans: tuple[_Span, ...]  # in order

    @classmethod
    def of(cls, text: str, replaced: Sequence[tuple[int, int, Rule]]) -> Rewrite:
        pieces: list[str] = []
        spans: list[_Span] = []
        done = spoken_length = 0
        for start, end, rule in replaced:
            pieces.append(text[done:start])
            spoken_length += start - done
            said = rule.spoken
            # Kept apart from the words around it where it matched inside a word.
            if said.startswith(PHONEMES_OPEN) and _is_word(text[start - 1 : start]):
                said = " " + said
            if said.endswith(PHONEMES_CLOSE) and _is_word(text[end : end + 1]):
                said += " "
            pieces.append(said)
            spans.append((start, end, spoken_length, spoken_length + len(said)))
            spoken_length += len(said)
            done = end
        pieces.append(text[done:])
        return cls(text, "".join(pieces), tuple(spans))

    @classmethod
    def unchanged(cls, text: str) -> Rewrite:
        return cls(text, text, ())

    def part(self, start: int, end: int) -> Rewrite:
        """The rewrite of `written[start:end]` (a chunk of it). A replaced span goes with
        the part its first character is in; in the next part its rest is said as nothing."""
        first, last = self._spoken_at(start), self._spoken_at(end)
        spans: list[_Span] = []
        for written_start, written_end, spoken_start, spoken_end in self.spans:
            if written_end <= start or written_start >= end:
                continue
            stop = min(written_end, end) - start
            if written_start < start:
                spans.append((0, stop, 0, 0))
            else:
                spans.append(
                    (written_start - start, stop, spoken_start - first, spoken_end - first)
                )
        return Rewrite(self.written[start:end], self.spoken[first:last], tuple(spans))

    def _spoken_at(self, index: int) -> int:
        """Where the written boundary before `index` is in the spoken text (after a span
        `index` falls inside)."""
        shift = 0
        for written_start, written_end, _, spoken_end in self.spans:
            if index <= written_start:
                break
            if index < written_end:
                return spoken_end
            shift = spoken_end - written_end
        return index + shift

    def word_times(self, pcm: Pcm) -> tuple[WordTime, ...]:
        """When each word as written is said, from the times of the words as spoken: a
        replaced word lasts as long as what replaced it."""
        if not pcm.word_times:
            return ()
        starts, ends = character_times(self.spoken, pcm.word_times, pcm.duration_seconds)
        replaced_at = [span[0] for span in self.spans]
        times: list[WordTime] = []
        for word in _WORD.finditer(self.written):
            first, _ = self._spoken_range(replaced_at, word.start())
            _, last = self._spoken_range(replaced_at, word.end() - 1)
            if last <= first:  # an alias of nothing: an instant where it was
                times.append((starts[first] if first < len(starts) else pcm.duration_seconds,) * 2)
                continue
            times.append((starts[first], ends[last - 1]))
        return tuple(times)

    def _spoken_range(self, replaced_at: list[int], index: int) -> tuple[int, int]:
        """Where the written character at `index` is in the spoken text (`replaced_at`:
        where each span starts as written)."""
        at = bisect.bisect_right(replaced_at, index) - 1
        if at >= 0:
            _, end, spoken_start, spoken_end = self.spans[at]
            if index < end:
                return spoken_start, spoken_end
            shift = spoken_end - end
        else:
            shift = 0
        return index + shift, index + shift + 1


def pronounced(say: Callable[[str], Pcm], lexicon: Lexicon) -> Callable[[str], Pcm]:
    """`say`, with the words `lexicon` has rules for said as they say."""
    if not len(lexicon):
        return say

    def saying(text: str) -> Pcm:
        rewrite = lexicon.rewrite(text)
        if not rewrite.spans:
            return say(text)
        pcm = say(rewrite.spoken)
        return dataclasses.replace(pcm, word_times=rewrite.word_times(pcm))

    return saying
