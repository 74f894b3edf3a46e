"""API key secrets: made once, shown once, stored only as a display prefix and an HMAC."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import string
from dataclasses import dataclass
from pathlib import Path

from voice_service.settings import Settings

_ALPHABET = string.ascii_letters + string.digits
SECRET_PREFIX = "vs_"  # noqa: S105 (a marker, not a secret)
SECRET_BODY_LENGTH = 40  # 40 base62 characters carry 238 bits
DISPLAY_PREFIX_LENGTH = 10


@dataclass(frozen=True, slots=True)
class NewSecret:
    secret: str
    prefix: str


def generate_secret() -> NewSecret:
    body = "".join(secrets.choice(_ALPHABET) for _ in range(SECRET_BODY_LENGTH))
    secret = SECRET_PREFIX + body
    return NewSecret(secret=secret, prefix=secret[:DISPLAY_PREFIX_LENGTH])


def looks_like_secret(value: str) -> bool:
    body = value.removeprefix(SECRET_PREFIX)
    return (
        value.startswith(SECRET_PREFIX)
        and len(body) == SECRET_BODY_LENGTH
        and all(c in _ALPHABET for c in body)
    )


class SecretHasher:
    """HMAC-SHA256 under a server-side pepper: a stolen database alone cannot test guesses."""

    def __init__(self, pepper: bytes) -> None:
        self._pepper = pepper

    def hash(self, secret: str) -> str:
        return hmac.new(self._pepper, secret.encode(), hashlib.sha256).hexdigest()


class MissingPepper(ValueError):
    """A shared database needs the cluster's pepper; a node must not make its own."""


def load_pepper(settings: Settings) -> bytes:
    """The configured pepper; on the embedded SQLite default, one generated into the data
    dir at first use."""
    if settings.key_pepper:
        return settings.key_pepper.encode()
    if not settings.is_sqlite:
        raise MissingPepper(
            "VOICE_SERVICE_KEY_PEPPER is required with a shared database: every node "
            "must hash keys with the same pepper (e.g. openssl rand -hex 32, set once)."
        )
    path = settings.data_dir / "key-pepper"
    if not path.exists():
        _create_private_file(path, secrets.token_hex(32))
    return path.read_text().strip().encode()


def _create_private_file(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first; use theirs
        return
    with os.fdopen(fd, "w") as file:
        file.write(content)
