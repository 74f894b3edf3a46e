"""Word error rate: the one measure of intelligibility the benchmark and the tests share."""

from __future__ import annotations

import re
import unicodedata


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


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(word edits, reference words): Levenshtein distance over `words`."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, hyp_word in enumerate(hyp, 1):
            substitution = previous + (ref_word != hyp_word)
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, substitution)
    return row[-1], len(ref)


def word_error_rate(reference: str, hypothesis: str) -> float:
    edits, total = word_errors(reference, hypothesis)
    return edits / max(total, 1)
