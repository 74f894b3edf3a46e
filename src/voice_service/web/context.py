"""Everything a request handler needs, built once per app and reached through dependencies:
the services' `Runtime`, and what only requests use (keys, limits, caches, the request log)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from voice_service.accounts.password_checks import PasswordChecks
from voice_service.books.requestlog.writer import RequestLogWriter
from voice_service.jobs.worker import JobWorkers
from voice_service.kit.ratelimit import RateLimiter
from voice_service.runtime import Runtime
from voice_service.tenancy.cache import FreshCache, TenancyWatcher
from voice_service.tenancy.keys import SecretHasher
from voice_service.tenancy.principal import Principal
from voice_service.voices.listing import VoiceListing
from voice_service.webhooks.worker import DeliveryWorkers


@dataclass(slots=True, kw_only=True)
class AppContext(Runtime):
    hasher: SecretHasher
    limiter: RateLimiter
    request_log: RequestLogWriter
    tenancy: TenancyWatcher
    principals: FreshCache[str, Principal]  # by the key secret's hash
    clone_listings: FreshCache[str, bytes]  # GET /voices bodies by organization id
    password_checks: PasswordChecks  # console sign-ins' argon2, off the event loop
    # Set when the node begins to stop (SIGTERM), before uvicorn closes connections: open
    # WebSocket sessions finish what they took, then close themselves (web/server.py).
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # Set by the lifespan once the catalogue is synced.
    voice_listing: VoiceListing | None = None
    # The transcription jobs' and webhook deliveries' queues, and this process's workers
    # on them (set with the app).
    jobs: JobWorkers | None = None
    deliveries: DeliveryWorkers | None = None
