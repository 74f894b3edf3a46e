"""Text that arrives in pieces (a language model's reply as it is written), spoken clause
by clause: where the text received so far may be cut so that what is spoken sounds whole."""

from __future__ import annotations

import re

# Where a clause ends: a clause mark or sentence end (closing quotes and brackets kept with
# it) followed by a space, or a line break.
_CLAUSE_END = re.compile(
    r"[.!?\u2026,;:\u3002\uff01\uff1f\uff0c\uff1b\uff1a][\"')\]\u201d\u2019]*\s|\n"
)
LONGEST_RUN = 120  # characters spoken without waiting for a clause's end


def next_clause(pending: str, *, everything: bool) -> tuple[str, str]:
    """(what to speak now, what to keep waiting): up to the last clause end, or all of
    it with `everything`; a long run without one up to its last space."""
    if everything:
        return pending, ""
    ends = [match.end() for match in _CLAUSE_END.finditer(pending)]
    if ends:
        return pending[: ends[-1]], pending[ends[-1] :]
    if len(pending) >= LONGEST_RUN:
        cut = pending.rfind(" ", 0, len(pending)) + 1 or len(pending)
        return pending[:cut], pending[cut:]
    return "", pending
