"""What the services need to do their work, built once per app: the database, the engines,
the pool and providers that run them, the books and the blob store. Nothing of the web: the
web's own context (`web.context.AppContext`) is a `Runtime` with the request side added."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from voice_service.books.ledger import Books
from voice_service.engines.deadline import InferenceBudget
from voice_service.inference.engines import Engines
from voice_service.inference.pool import InferencePool
from voice_service.inference.providers.table import Providers
from voice_service.kit.blobs import BlobStore
from voice_service.kit.metrics.registry import Metrics
from voice_service.kit.workdir import ProcessDir
from voice_service.settings import Settings


@dataclass(slots=True, kw_only=True)
class Runtime:
    settings: Settings
    db: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    pool: InferencePool
    providers: Providers  # inference on other servers, from the providers file
    blobs: BlobStore  # clones' samples and idempotent answers
    metrics: Metrics
    books: Books  # what requests' ledgers write to (books/ledger.py), and its clock
    # Set by the lifespan once models are loaded and this process's directory claimed.
    engines: Engines | None = None
    workdir: ProcessDir | None = None

    async def database_answers(self) -> bool:
        """The database takes a connection and answers a query (raises if not)."""
        async with self.db.connect() as connection:
            await connection.execute(text("SELECT 1"))
        return True

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
