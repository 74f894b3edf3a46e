"""Multipart uploads: parsed as they stream in, the file spooled to disk, never whole in RAM.

The body-size middleware has already capped the stream; here the parser's own limits stop
part floods and oversized text fields, and the file lands in a named temporary file that
PyAV can open and that is removed when the request is done.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import Request
from starlette.datastructures import UploadFile

from voice_service.core.errors import (
    InvalidRequest,
    PayloadTooLarge,
)
from voice_service.core.vocabulary import megabytes

# Room for the boundaries and part headers around a file of the full allowed size.
MULTIPART_OVERHEAD_BYTES = 64 * 1024
MAX_FIELDS = 16  # OpenAI's transcription form alone has ten
MAX_FIELD_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class Upload:
    path: Path
    items: tuple[tuple[str, str], ...]  # the text fields, in order, repeated names repeated

    @property
    def fields(self) -> dict[str, str]:
        """Each text field's last value."""
        return dict(self.items)

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.items if key == name]


@asynccontextmanager
async def receive_audio_upload(
    request: Request, max_bytes: int, directory: Path
) -> AsyncIterator[Upload]:
    """The request's `file` (at most `max_bytes`) and text fields. The file lands in
    `directory` (the process's own: what a crash leaves there is removed at the next
    start) and is deleted on exit, whatever the exit."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise InvalidRequest("Content-Type must be multipart/form-data with a file field.")
    # Starlette's parser raises HTTPException(400) on malformed multipart, answered as
    # INVALID_REQUEST by the one handler; files beyond the first and floods of fields are
    # refused by count, text fields by size.
    form = await request.form(max_files=1, max_fields=MAX_FIELDS, max_part_size=MAX_FIELD_BYTES)
    try:
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise InvalidRequest("file: an audio file is required.")
        if file.size is not None and file.size > max_bytes:
            raise PayloadTooLarge(f"file: the file exceeds the {megabytes(max_bytes)} limit.")
        items = tuple((k, v) for k, v in form.multi_items() if isinstance(v, str))
        path = await asyncio.to_thread(_spool_to_named_file, file, directory)
        try:
            yield Upload(path=path, items=items)
        finally:
            path.unlink(missing_ok=True)
    finally:
        await form.close()


def _spool_to_named_file(file: UploadFile, directory: Path) -> Path:
    # The parser spools to an anonymous file; decoders want a path.
    file.file.seek(0)
    with tempfile.NamedTemporaryFile(dir=directory, prefix="upload-", delete=False) as target:
        try:
            shutil.copyfileobj(file.file, target, length=1024 * 1024)
        except BaseException:  # a full disk, a cancelled request: no file left behind
            Path(target.name).unlink(missing_ok=True)
            raise
    return Path(target.name)
