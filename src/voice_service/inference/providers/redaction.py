"""What a provider said, made safe for this node's log.

An upstream's refusal may quote the credentials it was sent ("Incorrect API key provided:
Bearer sk-…", a replica URL's user:password as its Basic header). Its words never reach a
tenant (`provider` answers in ours); the operator reads them in the log, with every
credential this node sends, in every form it is sent in, and anything shaped like one,
replaced.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

REDACTED = "[redacted]"
# The longest piece of an upstream's answer that is logged.
LOGGED_CHARACTERS = 500

# Anything after an HTTP auth scheme, and tokens shaped like well-known API keys.
_SHAPES = re.compile(
    r"(?i)\b(bearer|basic)\s+[^\s\"',;]+|\bsk-[A-Za-z0-9_\-]{8,}|\bvs_[A-Za-z0-9]{20,}"
)


def secrets_of(api_key: str | None, urls: Iterable[str]) -> tuple[str, ...]:
    """Every form in which the key and the URLs' user:password leave this node."""
    found: set[str] = set()
    if api_key:
        found.add(api_key)
    for url in urls:
        parts = urlsplit(url)
        if parts.username is None:
            continue
        user, password = unquote(parts.username), unquote(parts.password or "")
        pair = f"{user}:{password}"
        found |= {pair, base64.b64encode(pair.encode()).decode()}
        found |= {part for part in (password, parts.password) if part}
    # Longest first, so a secret inside another is not left half replaced.
    return tuple(sorted(found, key=len, reverse=True))


def redacted(text: str, secrets: Iterable[str]) -> str:
    """`text`, cut short, with `secrets` and credential-shaped tokens replaced."""
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    text = _SHAPES.sub(_keep_scheme, text)
    if len(text) > LOGGED_CHARACTERS:
        text = text[:LOGGED_CHARACTERS] + "…"
    return text


def _keep_scheme(match: re.Match[str]) -> str:
    scheme = match.group(1)
    return f"{scheme} {REDACTED}" if scheme else REDACTED
