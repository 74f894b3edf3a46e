"""Files the caller sends (multipart uploads of audio or a lexicon, parsed as they stream
in): the file spooled to disk, never whole in RAM (audio a job names by URL is fetched by
`jobs.submission`).

The body-size middleware has already capped the stream; here the parser's own limits stop
part floods and oversized text fields, and the file lands in a named temporary file that
PyAV can open and that is removed when the request is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from fastapi import Request
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.datastructures import UploadFile

from voice_service.books.idempotency.fingerprint import Fingerprint

if TYPE_CHECKING:  # a TypedDict the module declares for type checkers only
    from python_multipart.multipart import MultipartCallbacks
from voice_service.core.errors import (
    InvalidRequest,
    PayloadTooLarge,
)
from voice_service.core.vocabulary import megabytes
from voice_service.transcription import known_speakers

# Room for the boundaries and part headers around a file of the full allowed size.
MULTIPART_OVERHEAD_BYTES = 64 * 1024
MAX_FIELDS = 16  # OpenAI's transcription form alone has ten
MAX_FIELD_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class ExtraFields:
    """Text fields a form may carry beyond MAX_FIELDS: how many, and which of them may be
    longer than MAX_FIELD_BYTES (data URLs of short clips), up to how many bytes each."""

    count: int
    long_names: frozenset[str] = frozenset()
    long_bytes: int = MAX_FIELD_BYTES


NO_EXTRA_FIELDS = ExtraFields(0)
# A transcription form's known_speaker_names with their known_speaker_references (data URLs).
NAMED_PEOPLE_FIELDS = ExtraFields(
    2 * known_speakers.MAX_KNOWN_SPEAKERS,
    known_speakers.FIELDS,
    known_speakers.MAX_REFERENCE_BYTES,
)


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
async def receive_upload(
    request: Request,
    max_bytes: int,
    directory: Path,
    extra: ExtraFields = NO_EXTRA_FIELDS,
    *,
    what: str = "an audio file",
) -> AsyncIterator[Upload]:
    """The request's `file` (`what` it holds, at most `max_bytes`) and text fields. The file
    lands in `directory` (the process's own: what a crash leaves there is removed at the next
    start) and is deleted on exit, whatever the exit."""
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith("multipart/form-data"):
        raise InvalidRequest("Content-Type must be multipart/form-data with a file field.")
    # Starlette's parser raises HTTPException(400) on malformed multipart, answered as
    # INVALID_REQUEST by the one handler; files beyond the first and floods of fields are
    # refused by count, text fields by size.
    form = await request.form(
        max_files=1,
        max_fields=MAX_FIELDS + extra.count,
        max_part_size=max(MAX_FIELD_BYTES, extra.long_bytes),
    )
    try:
        _check_long_fields(form.multi_items(), extra.long_names)
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise InvalidRequest(f"file: {what} is required.")
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


def _check_long_fields(items: Sequence[tuple[str, object]], long_names: frozenset[str]) -> None:
    for name, value in items:
        too_long = isinstance(value, str) and len(value.encode()) > MAX_FIELD_BYTES
        if too_long and name not in long_names:
            raise InvalidRequest(f"{name}: a form field is longer than {MAX_FIELD_BYTES} bytes.")


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


@dataclass(frozen=True, slots=True)
class LargeUpload(Upload):
    fingerprint: str  # the request's, for its Idempotency-Key (books.idempotency.fingerprint)
    size: int  # of the file


@asynccontextmanager
async def receive_large_upload(
    request: Request, target: str, directory: Path, extra: ExtraFields = NO_EXTRA_FIELDS
) -> AsyncIterator[LargeUpload]:
    """A multipart upload of one `file` (a job's: up to a GiB) parsed as it streams in, the
    file written straight to `directory`, and the request fingerprinted on the way, so no
    part of it is ever held whole in memory or copied twice. The body-size middleware caps
    the stream; text fields are capped here, by count and size. `target`: the request's
    path and query as its Idempotency-Key's fingerprint takes them."""
    content_type = request.headers.get("content-type", "")
    media_type, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if media_type != b"multipart/form-data" or not boundary:
        raise InvalidRequest("Content-Type must be multipart/form-data with a file field.")
    handle, name = tempfile.mkstemp(dir=directory, prefix="upload-")
    path = Path(name)
    try:
        with os.fdopen(handle, "wb") as file:
            hashing = Fingerprint(request.method, target)  # fed by the form's parser
            form = _StreamedForm(file, hashing, extra)
            parser = MultipartParser(boundary, form.callbacks())
            async for chunk in request.stream():
                try:
                    parser.write(chunk)
                except MultipartParseError:
                    raise InvalidRequest("The multipart body is malformed.") from None
                if form.pending:
                    await asyncio.to_thread(form.flush)
            try:
                parser.finalize()
            except MultipartParseError:
                raise InvalidRequest("The multipart body is malformed.") from None
            await asyncio.to_thread(form.flush)
        if not form.has_file or not form.complete:
            raise InvalidRequest("file: an audio file is required.")
        yield LargeUpload(
            path=path, items=tuple(form.items), fingerprint=hashing.hexdigest(), size=form.size
        )
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class _StreamedForm:
    """python-multipart's callbacks for one upload: the `file` part's bytes gathered for the
    next write to disk, text fields kept (bounded), every part told to `hashing`."""

    def __init__(self, file: BinaryIO, hashing: Fingerprint, extra: ExtraFields) -> None:
        self._file = file
        self._hashing = hashing
        self._extra = extra
        self._headers: dict[bytes, bytes] = {}
        self._field = b""
        self._value = bytearray()
        self._in_file = False
        self._pending = bytearray()
        self.items: list[tuple[str, str]] = []
        self.has_file = False
        self.complete = False  # the last part ended
        self.size = 0

    @property
    def pending(self) -> bool:
        return len(self._pending) >= 1024 * 1024

    def flush(self) -> None:
        self._file.write(self._pending)
        self._pending.clear()

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self._begin,
            "on_header_field": self._header_field,
            "on_header_value": self._header_value,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._data,
            "on_part_end": self._end,
            "on_end": self._finished,
        }

    def _begin(self) -> None:
        self._headers.clear()
        self._value.clear()
        self._in_file = False
        self.complete = False

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._hashing.header_field(data, start, end)
        self._field = data[start:end].lower()

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._hashing.header_value(data, start, end)
        self._headers[self._field] = self._headers.get(self._field, b"") + data[start:end]

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        name = options.get(b"name")
        if name is None:
            raise InvalidRequest("A multipart part has no name.")
        if b"filename" in options:
            if self.has_file or name != b"file":
                raise InvalidRequest("Send one file, in the field named file.")
            self.has_file = self._in_file = True
            return
        most = MAX_FIELDS + self._extra.count
        if len(self.items) >= most:
            raise InvalidRequest(f"Too many form fields (at most {most}).")
        self._field = name

    def _data(self, data: bytes, start: int, end: int) -> None:
        self._hashing.part_data(data, start, end)
        if self._in_file:
            self._pending += data[start:end]
            self.size += end - start
            return
        self._value += data[start:end]
        long = self._field.decode("latin-1") in self._extra.long_names
        if len(self._value) > (self._extra.long_bytes if long else MAX_FIELD_BYTES):
            raise InvalidRequest(f"A form field is longer than {MAX_FIELD_BYTES} bytes.")

    def _end(self) -> None:
        self._hashing.part_end()
        if not self._in_file:
            try:
                value = self._value.decode()
            except UnicodeDecodeError:
                raise InvalidRequest("Form fields must be UTF-8 text.") from None
            self.items.append((self._field.decode("latin-1"), value))
        self.complete = True

    def _finished(self) -> None:
        self.complete = True
