"""Keys older than 24 hours, removed in small batches by a background task on each node:
requests never wait on it (a retry of an expired key replaces the entry itself)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.books.idempotency import repository
from voice_service.books.idempotency.keys import answer_name
from voice_service.kit.blobs import BlobStore
from voice_service.kit.db import transaction

logger = logging.getLogger(__name__)

BATCH = 200
INTERVAL_SECONDS = 600.0


async def remove_expired(
    sessions: async_sessionmaker[AsyncSession],
    store: BlobStore,
    clock: Callable[[], datetime],
    batch: int = BATCH,
) -> int:
    """Remove one batch of expired entries and their stored answers; returns how many."""
    async with sessions() as session:
        entries = await repository.expired(session, clock(), batch)
    removed = 0
    for entry in entries:
        async with transaction(sessions) as session:
            gone = await repository.remove(session, entry.org_id, entry.key, entry.expires_at)
        if gone:
            removed += 1
            if entry.body_in_store:
                with contextlib.suppress(Exception):  # an orphan object costs only storage
                    await store.drop_answer(answer_name(entry.org_id, entry.request_id))
    return removed


async def expire_forever(
    sessions: async_sessionmaker[AsyncSession],
    store: BlobStore,
    clock: Callable[[], datetime],
) -> None:
    """Every few minutes, batches until none is left; failures wait for the next round."""
    while True:
        await asyncio.sleep(INTERVAL_SECONDS)
        try:
            while await remove_expired(sessions, store, clock) == BATCH:
                pass
        except Exception as exc:
            logger.warning("idempotency keys: expired entries not removed: %r", exc)
