"""Identifiers: a type prefix and a random token, e.g. req_3f9c..., voice_8a1b...."""

from __future__ import annotations

import hashlib
import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def catalogue_voice_id(engine_voice_key: str) -> str:
    """Stable across restarts and nodes: derived from the engine's own voice key."""
    return "voice_" + hashlib.sha256(engine_voice_key.encode()).hexdigest()[:24]
