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
    digest = hashlib.sha256(f"{method} {target}\n".encode())
    parts = _multipart_parts(content_type, body)
    if parts is None:
        digest.update(b"body\n" + body)
    else:
        for part in parts:
            digest.update(b"part\n" + part)
    return digest.hexdigest()


def _multipart_parts(content_type: str | None, body: bytes) -> list[bytes] | None:
    """Each part's headers and a hash of its content; None unless the body is well-formed
    multipart (anything else is hashed whole, and its route refuses it)."""
    if content_type is None:
        return None
    media_type, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if media_type != b"multipart/form-data" or not boundary:
        return None
    parts: list[bytes] = []
    headers = bytearray()
    content = hashlib.sha256()

    def on_header_field(data: bytes, start: int, end: int) -> None:
        headers.extend(data[start:end].lower() + b":")

    def on_header_value(data: bytes, start: int, end: int) -> None:
        headers.extend(data[start:end] + b"\n")

    def on_part_data(data: bytes, start: int, end: int) -> None:
        content.update(data[start:end])

    def on_part_end() -> None:
        nonlocal content
        parts.append(bytes(headers) + content.digest())
        headers.clear()
        content = hashlib.sha256()

    parser = MultipartParser(
        boundary,
        {
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError:
        return None
    return parts
