"""ElevenLabs' request stitching: a speech request names earlier or later ones by their
request ids (`previous_request_ids`, `next_request_ids`) in place of sending their text.

Only what continuity reads is kept: each billed speech request's first and last
`EDGE_CHARS` characters, for `VOICE_SERVICE_STITCHING_MINUTES`, written in the billing
transaction itself (a request that failed is never named) and deleted with the
organization's next request once past that time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.books.ledger import Ledger
from voice_service.core.errors import InvalidRequest
from voice_service.core.models import SpokenText
from voice_service.engines.continuity import CONTEXT_CHARS
from voice_service.runtime import Runtime

MAX_IDS = 3  # per field, as ElevenLabs takes
# Twice what continuity says of a neighbour: enough to find where its sentence starts or ends.
EDGE_CHARS = 2 * CONTEXT_CHARS


def remember(runtime: Runtime, ledger: Ledger, org_id: str, written: str) -> None:
    """Keep the edges of the text a request says (as written, without SSML's tags) once it
    is billed, unless the operator keeps none."""
    minutes = runtime.settings.stitching_minutes
    if not minutes:
        return
    request_id = ledger.request_id

    async def write(session: AsyncSession, now: datetime) -> None:
        await session.execute(
            delete(SpokenText).where(
                SpokenText.org_id == org_id,
                SpokenText.created_at < now - timedelta(minutes=minutes),
            )
        )
        session.add(
            SpokenText(
                request_id=request_id,
                org_id=org_id,
                head=written[:EDGE_CHARS],
                tail=written[-EDGE_CHARS:],
                created_at=now,
            )
        )

    ledger.writes_when_billed(write)


async def stitched(
    runtime: Runtime,
    org_id: str,
    previous_ids: Sequence[str] | None,
    next_ids: Sequence[str] | None,
) -> tuple[str | None, str | None]:
    """The text said before and after, as the requests named say it: the previous ones'
    ends and the next ones' starts, in the order named. None where a field names none."""
    if not previous_ids and not next_ids:
        return None, None
    minutes = runtime.settings.stitching_minutes
    if not minutes:
        raise InvalidRequest(
            "previous_request_ids and next_request_ids are not taken: this service keeps no "
            "request's text; send previous_text and next_text instead."
        )
    wanted = [*(previous_ids or ()), *(next_ids or ())]
    since = runtime.books.clock() - timedelta(minutes=minutes)
    async with runtime.sessions() as session:
        rows = await session.scalars(
            select(SpokenText).where(
                SpokenText.request_id.in_(wanted),
                SpokenText.org_id == org_id,
                SpokenText.created_at >= since,
            )
        )
        found = {row.request_id: row for row in rows}
    missing = [request_id for request_id in wanted if request_id not in found]
    if missing:
        raise InvalidRequest(
            f"No speech request {missing[0]!r} of this organization in the last {minutes} "
            "minutes: previous_request_ids and next_request_ids name billed speech requests "
            "by their X-Request-ID."
        )
    before = " ".join(found[request_id].tail for request_id in previous_ids or ()) or None
    after = " ".join(found[request_id].head for request_id in next_ids or ()) or None
    return before, after
