"""What the nodes of one cluster must agree on, recorded once in the shared database.

A node that disagrees with its cluster must not start: with another key pepper it would
answer 401 to every valid key while reporting ready. And facts made once for the whole
cluster (its first organization) are claimed by one node, whatever starts concurrently.
"""

from __future__ import annotations

import hashlib
import hmac

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.models import ServiceMeta
from voice_service.kit.db import hold_startup_lock, insert_if_absent
from voice_service.settings import Settings

PEPPER_FINGERPRINT = "pepper_fingerprint"
FIRST_ORGANIZATION = "first_organization"


class ClusterMismatch(Exception):
    """This node's configuration contradicts what the database records for the cluster."""


async def join(session: AsyncSession, settings: Settings, pepper: bytes) -> None:
    """Take this node's turn at start-up (the start-up lock, until `session`'s transaction
    ends), then check that it agrees with its cluster. `serve` joins before it makes the
    first key and prints its banner; each app's lifespan joins again, whichever server
    runs it (both checks are reads once the values are recorded)."""
    await hold_startup_lock(session)
    await check_pepper(session, pepper)
    await check_connection_budget(session, settings)


def pepper_fingerprint(pepper: bytes) -> str:
    """A value that tells peppers apart without revealing them (an HMAC of a constant)."""
    return hmac.new(pepper, b"voice-service pepper fingerprint v1", hashlib.sha256).hexdigest()


async def check_pepper(session: AsyncSession, pepper: bytes) -> None:
    """Record this pepper's fingerprint if none is; raise if another one is."""
    ours = pepper_fingerprint(pepper)
    recorded = await claim(session, PEPPER_FINGERPRINT, ours)
    if recorded != ours:
        raise ClusterMismatch(
            "this node's key pepper is not the one the database was set up with "
            f"(fingerprint {ours[:12]}…, recorded {recorded[:12]}…): it would refuse every "
            "API key. Give every node the cluster's VOICE_SERVICE_KEY_PEPPER."
        )


async def check_connection_budget(session: AsyncSession, settings: Settings) -> None:
    """Raise if this node's processes could open more PostgreSQL connections than the
    server takes from clients: past that, requests would fail under load, not at start."""
    if session.get_bind().dialect.name != "postgresql":
        return
    limit = int(await session.scalar(text("SHOW max_connections")) or 0)
    reserved = int(await session.scalar(text("SHOW superuser_reserved_connections")) or 0)
    available = limit - reserved
    needed = settings.workers * settings.db_connections_per_process
    if needed > available:
        raise ClusterMismatch(
            f"this node may open {needed} PostgreSQL connections ({settings.workers} "
            f"workers x (VOICE_SERVICE_DB_POOL_SIZE {settings.db_pool_size} + "
            f"VOICE_SERVICE_DB_MAX_OVERFLOW {settings.db_max_overflow})), but the server's "
            f"max_connections {limit} leaves {available} for clients ({reserved} reserved). "
            "Lower the pool settings or --workers, or raise max_connections."
        )


async def claim(session: AsyncSession, key: str, value: str) -> str:
    """Record `value` under `key` unless a value is recorded; return the recorded value.

    Concurrent claims serialize on the key's primary key: one inserts, the others wait for
    its transaction and then see its value."""
    await session.execute(
        insert_if_absent(session.get_bind().dialect, ServiceMeta).values(key=key, value=value)
    )
    stored = await recorded(session, key)
    assert stored is not None
    return stored


async def recorded(session: AsyncSession, key: str) -> str | None:
    """The value recorded under `key`, if any."""
    return await session.scalar(select(ServiceMeta.value).where(ServiceMeta.key == key))
