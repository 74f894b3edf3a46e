"""What makes two requests the same request: method, path (with its query) and body, hashed.

A multipart body is hashed part by part (each part's headers and content, in order), not as
bytes: a client retrying an upload encodes it again under a fresh random boundary (httpx,
and so the OpenAI SDK, do), and that is still the same request.
"""

from __future__ import annotations

import hashlib

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header


def fingerprint(method: str, target: str, content_type: str | None, body: bytes) -> str:
    hashing = Fingerprint(method, target, content_type)
    hashing.update(body)
    return hashing.hexdigest()


class Fingerprint:
    """`fingerprint` of a body that arrives in pieces (an upload too big to hold). Without
    a `content_type` it parses nothing: the caller's own multipart parser feeds its
    `header_field`, `header_value`, `part_data` and `part_end`, and the digest is of the
    parts alone."""

    def __init__(self, method: str, target: str, content_type: str | None = None) -> None:
        self._head = f"{method} {target}\n".encode()
        self._whole = hashlib.sha256(self._head + b"body\n")  # the digest of a plain body
        self._parts: list[bytes] | None = []
        self._headers = bytearray()
        self._content = hashlib.sha256()
        self._parser = self._multipart_parser(content_type)
        if self._parser is None and content_type is not None:
            self._parts = None

    def update(self, chunk: bytes) -> None:
        self._whole.update(chunk)
        if self._parser is None:
            return
        try:
            self._parser.write(chunk)
        except MultipartParseError:
            self._parser, self._parts = None, None

    def hexdigest(self) -> str:
        """Each part's headers and a hash of its content, in order; the body whole unless it
        is well-formed multipart (anything else is refused by its route)."""
        if self._parser is not None:
            try:
                self._parser.finalize()
            except MultipartParseError:
                self._parts = None
        if self._parts is None:
            return self._whole.hexdigest()
        digest = hashlib.sha256(self._head)
        for part in self._parts:
            digest.update(b"part\n" + part)
        return digest.hexdigest()

    def _multipart_parser(self, content_type: str | None) -> MultipartParser | None:
        if content_type is None:
            return None
        media_type, options = parse_options_header(content_type)
        boundary = options.get(b"boundary")
        if media_type != b"multipart/form-data" or not boundary:
            return None
        return MultipartParser(
            boundary,
            {
                "on_header_field": self.header_field,
                "on_header_value": self.header_value,
                "on_part_data": self.part_data,
                "on_part_end": self.part_end,
            },
        )

    def header_field(self, data: bytes, start: int, end: int) -> None:
        self._headers.extend(data[start:end].lower() + b":")

    def header_value(self, data: bytes, start: int, end: int) -> None:
        self._headers.extend(data[start:end] + b"\n")

    def part_data(self, data: bytes, start: int, end: int) -> None:
        self._content.update(data[start:end])

    def part_end(self) -> None:
        assert self._parts is not None
        self._parts.append(bytes(self._headers) + self._content.digest())
        self._headers.clear()
        self._content = hashlib.sha256()
