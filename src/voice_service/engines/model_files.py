"""Models shipped in parts: joined once into the data dir, checked, reused on later starts.

PyPI caps a wheel's size, so the packaged Whisper base and Kokoro models arrive as several
pip packages that each hold one slice of a file. Every engine joins its slices the same way.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from voice_service.engines.protocols import EngineError

_COPY_CHUNK = 8 * 1024 * 1024


class ModelIntegrityError(EngineError):
    """A joined model does not match the expected size or checksum."""


def write_joined(target: Path, sources: Iterable[Path], expected: tuple[int, str] | None) -> None:
    """Concatenate `sources` into `target` via a temporary file in the same directory.

    With `expected` (size in bytes, SHA-256 hex), a result that differs raises
    `ModelIntegrityError` and leaves `target` as it was. The rename at the end means a crash
    (or a second process starting at the same time) never leaves a half-written `target`.
    """
    digest = hashlib.sha256()
    size = 0
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with source.open("rb") as src:
                    while chunk := src.read(_COPY_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if expected is not None and (size, digest.hexdigest()) != expected:
            raise ModelIntegrityError(
                f"joined {target.name} is {size} bytes with SHA-256 {digest.hexdigest()}, "
                f"expected {expected[0]} bytes with SHA-256 {expected[1]}; "
                "reinstall the model packages"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
