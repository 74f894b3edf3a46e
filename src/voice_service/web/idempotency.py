"""The HTTP half of `Idempotency-Key` (the books' half is `books.idempotency.keys`): the
header checked, the request fingerprinted, then the key claimed for this request, or its
first answer raised to be sent again."""

from __future__ import annotations

import re
from urllib.parse import urlencode

from fastapi import Request

from voice_service.books.idempotency.fingerprint import fingerprint
from voice_service.books.idempotency.keys import HEADER, claim_key
from voice_service.books.ledger import Ledger
from voice_service.core.errors import InvalidRequest
from voice_service.web.context import AppContext

_VALID_KEY = re.compile(r"[\x20-\x7e]{1,255}")  # printable ASCII


async def claim_idempotency_key(
    request: Request, context: AppContext, ledger: Ledger, key: str, digest: str | None = None
) -> None:
    """Claim `key` for the request to run; or raise `StoredAnswer` with the key's first
    answer (after waiting for it, if it still runs). `digest`: the request's fingerprint,
    if its handler took it as the body streamed in (else the body is read here)."""
    if _VALID_KEY.fullmatch(key) is None:
        raise InvalidRequest(f"{HEADER}: 1 to 255 printable ASCII characters.", param=HEADER)
    if digest is None:
        body = await request.body()  # kept by the request for its handler to parse
        digest = fingerprint(
            request.method, request_target(request), request.headers.get("content-type"), body
        )
    settings = context.settings
    await claim_key(
        context.sessions,
        context.blobs,
        context.books.clock,
        ledger,
        key,
        digest,
        max_bytes=settings.idempotent_answer_max_bytes,
        wait_seconds=settings.queue_timeout_seconds + settings.inference_timeout_seconds,
    )


def request_target(request: Request) -> str:
    """The path, and the query (which can choose the answer's format) in a canonical order."""
    query = sorted(request.query_params.multi_items())
    return f"{request.url.path}?{urlencode(query)}" if query else request.url.path
