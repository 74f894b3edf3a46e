"""Word error rate: the one measure of intelligibility the benchmark and the tests share.

Japanese is written without spaces, and one word in kanji or in kana ("隣", "となり"), so its
unit is the character of the text's reading in katakana (OpenJTalk's, as the voices read it):
a character error rate. The same front end reads reference and transcript, so a word it
misreads in the reference is not counted against the voice that spoke it so.
"""

from __future__ import annotations

import re
import unicodedata

# Languages measured by characters of their reading (`units`).
_READ_BY_CHARACTER = frozenset({"ja"})


def measure_name(language: str | None) -> str:
    """What `word_error_rate` is for `language`: "WER", or "CER" of the readings."""
    return "CER" if language in _READ_BY_CHARACTER else "WER"


def units(text: str, language: str | None = None) -> list[str]:
    """`words`, or for Japanese the characters of the reading."""
    if language not in _READ_BY_CHARACTER:
        return words(text)
    import pyopenjtalk  # the ja extra (dev installs it)

    reading = str(pyopenjtalk.g2p(unicodedata.normalize("NFKC", text), kana=True))
    return [char for char in reading if unicodedata.category(char)[0] in "LN"]


def words(text: str) -> list[str]:
    """Lower-case words without accents, split at any punctuation (so "l'équipe" and
    Whisper's "l\u2019équipe" compare alike). Whisper base often drops an accent ("como" for
    "cómo") that the speech had, which says nothing about the speech."""
    bare = "".join(
        char
        for char in unicodedata.normalize("NFD", text.lower())
        if not unicodedata.combining(char)
    )
    return re.sub(r"[^\w\s]", " ", bare).split()


def word_errors(reference: str, hypothesis: str, language: str | None = None) -> tuple[int, int]:
    """(edits, reference units): Levenshtein distance over `units` (words, but for Japanese)."""
    ref, hyp = units(reference, language), units(hypothesis, language)
    row = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, hyp_word in enumerate(hyp, 1):
            substitution = previous + (ref_word != hyp_word)
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, substitution)
    return row[-1], len(ref)


def word_error_rate(reference: str, hypothesis: str, language: str | None = None) -> float:
    edits, total = word_errors(reference, hypothesis, language)
    return edits / max(total, 1)
