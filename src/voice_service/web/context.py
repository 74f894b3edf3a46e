"""Everything a request handler needs, built once per app and reached through dependencies."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from voice_service.books.ledger import Books
from voice_service.books.requestlog.writer import RequestLogWriter
from voice_service.cloning.samples import SampleStore
from voice_service.engines.deadline import InferenceBudget
from voice_service.inference.engines import Engines
from voice_service.inference.pool import InferencePool
from voice_service.inference.providers.table import Providers
from voice_service.kit.metrics.registry import Metrics
from voice_service.kit.ratelimit import RateLimiter
from voice_service.kit.workdir import ProcessDir
from voice_service.settings import Settings
from voice_service.tenancy.cache import FreshCache, TenancyWatcher
from voice_service.tenancy.keys import SecretHasher
from voice_service.tenancy.password_checks import PasswordChecks
from voice_service.tenancy.principal import Principal
from voice_service.voices.listing import VoiceListing


@dataclass(slots=True)
class AppContext:
    settings: Settings
    db: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    hasher: SecretHasher
    limiter: RateLimiter
    pool: InferencePool
    samples: SampleStore
    request_log: RequestLogWriter
    metrics: Metrics
    tenancy: TenancyWatcher
    principals: FreshCache[str, Principal]  # by the key secret's hash
    clone_listings: FreshCache[str, bytes]  # GET /voices bodies by organization id
    password_checks: PasswordChecks  # console sign-ins' argon2, off the event loop
    providers: Providers  # inference on other servers, from the providers file
    books: Books  # what requests' ledgers write to (ledger.py), and its clock
    # Set when the node begins to stop (SIGTERM), before uvicorn closes connections: open
    # WebSocket sessions finish what they took, then close themselves (server.py).
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # Set by the lifespan once models are loaded and the catalogue synced.
    engines: Engines | None = None
    voice_listing: VoiceListing | None = None
    workdir: ProcessDir | None = None

    @property
    def uploads_dir(self) -> Path:
        assert self.workdir is not None, "the lifespan has not run"
        return self.workdir.uploads

    @property
    def inference_budget(self) -> InferenceBudget:
        return InferenceBudget(
            self.settings.inference_timeout_seconds,
            self.settings.inference_timeout_per_audio_second,
        )
