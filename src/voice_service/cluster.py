"""What the nodes of one cluster must agree on, recorded once in the shared database.

A node that disagrees with its cluster must not start: with another key pepper it would
answer 401 to every valid key while reporting ready. And facts made once for the whole
cluster (its first organization) are claimed by one node, whatever starts concurrently.
"""

from __future__ import annotations

import hashlib
import hmac

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.models import ServiceMeta

PEPPER_FINGERPRINT = "pepper_fingerprint"
FIRST_ORGANIZATION = "first_organization"


class ClusterMismatch(Exception):
    """This node's configuration contradicts what the database records for the cluster."""


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


async def claim(session: AsyncSession, key: str, value: str) -> str:
    """Record `value` under `key` unless a value is recorded; return the recorded value.

    Concurrent claims serialize on the key's primary key: one inserts, the others wait for
    its transaction and then see its value."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    await session.execute(insert(ServiceMeta).values(key=key, value=value).on_conflict_do_nothing())
    stored = await recorded(session, key)
    assert stored is not None
    return stored


async def recorded(session: AsyncSession, key: str) -> str | None:
    """The value recorded under `key`, if any."""
    return await session.scalar(select(ServiceMeta.value).where(ServiceMeta.key == key))
