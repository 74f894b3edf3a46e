"""create_app(settings): the ASGI application."""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI

from voice_service.accounts.password_checks import PasswordChecks
from voice_service.api.cloning import router as cloning_router
from voice_service.api.models import router as models_router
from voice_service.api.pronunciation import router as pronunciation_router
from voice_service.api.request_log import router as requests_router
from voice_service.api.speech import router as speech_router
from voice_service.api.transcription import router as transcription_router
from voice_service.api.transcription_jobs import PATH as JOBS_PATH
from voice_service.api.transcription_jobs import router as jobs_router
from voice_service.api.usage import router as usage_router
from voice_service.api.voices import router as voices_router
from voice_service.api.webhooks import router as webhooks_router
from voice_service.audio.vad import load_vad
from voice_service.books.idempotency.expiry import expire_forever
from voice_service.books.ledger import Books
from voice_service.books.requestlog.spool import LogSpool
from voice_service.books.requestlog.writer import RequestLogWriter
from voice_service.cloning.repository import live_clones
from voice_service.console.app import install_console
from voice_service.console.headers import ConsoleHeadersMiddleware
from voice_service.inference.engines import Engines, load_announced
from voice_service.inference.pool import InferencePool
from voice_service.inference.providers.table import Providers
from voice_service.inference.transcribers import unload_idle_forever
from voice_service.jobs.worker import JobWorkers
from voice_service.kit import cluster
from voice_service.kit.blobs import blob_store
from voice_service.kit.db import (
    STARTUP_STATEMENT_TIMEOUT,
    SqliteWriteThread,
    create_engine,
    migrate,
    session_factory,
    transaction,
)
from voice_service.kit.metrics.multiprocess import shared_directory
from voice_service.kit.metrics.registry import Metrics
from voice_service.kit.ratelimit import RateLimiter
from voice_service.kit.workdir import ProcessDir, claim_orphans
from voice_service.openai_api.routes import router as openai_router
from voice_service.realtime.reference import reference_router
from voice_service.realtime.routes import native_router as realtime_native_router
from voice_service.realtime.routes import openai_router as realtime_openai_router
from voice_service.settings import Settings
from voice_service.tenancy.cache import FreshCache, TenancyWatcher
from voice_service.tenancy.keys import SecretHasher, load_pepper
from voice_service.voices.listing import VoiceListing
from voice_service.voices.repository import list_catalogue, sync_catalogue
from voice_service.web.context import AppContext
from voice_service.web.docs import docs_router
from voice_service.web.error_handlers import install_error_handlers
from voice_service.web.health import router as health_router
from voice_service.web.metrics import router as metrics_router
from voice_service.web.middleware import (
    HeadAsGetMiddleware,
    RepeatedQueryMiddleware,
    RequestBodyMiddleware,
    RequestContextMiddleware,
)
from voice_service.web.openapi import install_openapi
from voice_service.web.server import STATE_KEY, ConnectionPolicy
from voice_service.web.uploads import MULTIPART_OVERHEAD_BYTES
from voice_service.webhooks.worker import DeliveryWorkers
from voice_service.wyoming.listeners import WyomingListeners
from voice_service.wyoming.requests import METHOD as WYOMING_METHOD
from voice_service.wyoming.requests import WyomingPath

API_PREFIX = "/api/v1"
# Entries a process keeps (least recently used go first): a principal is a few hundred
# bytes, a clone listing up to a few kB (the default limit is 10 clones).
MAX_CACHED_PRINCIPALS = 10_000
MAX_CACHED_CLONE_LISTINGS = 2_000

DESCRIPTION = """Multi-tenant speech API: text to speech, speech to text and voice cloning.
Every request needs `Authorization: Bearer <API key>`; every response carries `X-Request-ID`."""


def create_app(settings: Settings | None = None, engines: Engines | None = None) -> FastAPI:
    """Build the app. `engines` lets several apps in one process share loaded models."""
    settings = settings or Settings()
    pepper = load_pepper(settings)
    context = _context(settings, pepper)
    app = FastAPI(
        title="Voice Service",
        version="1.0.0",
        description=DESCRIPTION,
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=None,  # served from the package below, not a CDN
        redoc_url=None,
        # A redirect to the slash-less path would echo the Host header back before the key
        # is checked; a path with a trailing slash is simply not a route (404).
        redirect_slashes=False,
        lifespan=functools.partial(_lifespan, context, pepper, engines),
    )
    app.state.context = context
    install_error_handlers(app)
    _include_routers(app)
    # After the error handlers: it replaces the API's handler with one that also renders pages.
    install_console(app)
    context.metrics.endpoints.use(app.routes)  # every route is in by now
    context.metrics.endpoints.name(WYOMING_METHOD, list(WyomingPath))
    _add_middleware(app, context)
    install_openapi(app, settings.max_upload_bytes)
    return app


def _context(settings: Settings, pepper: bytes) -> AppContext:
    db = create_engine(settings)
    sessions = session_factory(db)
    tenancy = TenancyWatcher(db)
    metrics = Metrics(org_labels=settings.metrics_org_labels, shared_directory=shared_directory())
    # SQLite is a local file: a slow commit there is contention, which the spool would add
    # to, not an outage (its busy timeout bounds the wait).
    log_writer = RequestLogWriter(
        sessions,
        None if settings.is_sqlite else settings.db_timeout_seconds,
        metrics,
        sqlite=SqliteWriteThread(settings) if settings.is_sqlite else None,
    )
    context = AppContext(
        settings=settings,
        db=db,
        sessions=sessions,
        hasher=SecretHasher(pepper),
        limiter=RateLimiter(
            settings.redis_url,
            timeout=settings.redis_timeout_seconds,
            processes=settings.cluster_nodes * settings.workers,
        ),
        pool=InferencePool(
            settings.pool_size, settings.queue_timeout_seconds, settings.queue_bound, metrics
        ),
        blobs=blob_store(settings, sessions, live_clones),
        request_log=log_writer,
        metrics=metrics,
        tenancy=tenancy,
        principals=FreshCache(tenancy, MAX_CACHED_PRINCIPALS),
        clone_listings=FreshCache(tenancy, MAX_CACHED_CLONE_LISTINGS),
        password_checks=PasswordChecks(),
        providers=Providers.from_settings(settings, metrics),
        books=Books(sessions, log_writer, metrics),
    )
    context.deliveries = DeliveryWorkers(context)
    context.jobs = JobWorkers(context, context.deliveries.queue)
    return context


@asynccontextmanager
async def _lifespan(
    context: AppContext, pepper: bytes, engines: Engines | None, app: FastAPI
) -> AsyncIterator[dict[str, Any]]:
    settings = context.settings
    # Start-up waits its turn behind other nodes: statements longer than requests'.
    startup_db = create_engine(settings, STARTUP_STATEMENT_TIMEOUT)
    try:
        await migrate(startup_db)
        loaded = (
            engines if engines is not None else await context.pool.start_up(Engines.load, settings)
        )
        # Live transcription's turn detection.
        await context.pool.start_up(load_announced, "the voice activity detector", load_vad)
        async with transaction(session_factory(startup_db)) as session:
            await cluster.join(session, settings, pepper)
            await sync_catalogue(session, [*context.providers.voices(), *loaded.catalogue()])
            context.voice_listing = VoiceListing(await list_catalogue(session), loaded)
    finally:
        await startup_db.dispose()
    # S3 samples a crash left without their voice (see kit/blobs.py).
    await context.blobs.sweep()
    context.engines = loaded
    context.tenancy.start()
    workdir, spool = await asyncio.to_thread(_claim_workdir, settings)
    context.workdir = workdir
    context.request_log.start(spool)
    expiry = asyncio.create_task(
        expire_forever(context.sessions, context.blobs, context.books.clock),
        name="idempotency-expiry",
    )
    unloading = None
    if loaded.transcribers is not None:
        unloading = asyncio.create_task(
            unload_idle_forever(loaded.transcribers), name="idle-model-unloads"
        )
    # What start-up made (models, modules, the catalogue) lives as long as the process:
    # out of the collector's sight, a full collection no longer walks it all again (it
    # showed in a cached GET /voices' time). Garbage is collected first, or it would be
    # kept for good.
    gc.collect()
    gc.freeze()
    assert context.jobs is not None and context.deliveries is not None
    context.deliveries.start()
    context.jobs.start()
    # The state reaches the server protocol too (voice_service.web.server): its timeouts
    # and its malformed-request rows go into these books.
    policy = ConnectionPolicy(
        settings.header_timeout_seconds,
        settings.send_timeout_seconds,
        settings.max_connections,
        context.books,
        context.stopping,
    )
    # Last: a Wyoming request is served from its first byte, on everything above.
    wyoming = app.state.wyoming = WyomingListeners(context)
    try:
        await wyoming.start()
        yield {STATE_KEY: policy}
    finally:
        await wyoming.stop(settings.drain_timeout_seconds)
        expiry.cancel()
        if unloading is not None:
            unloading.cancel()
        await context.jobs.stop()
        await context.deliveries.stop()
        await context.tenancy.stop()
        await context.request_log.stop()
        await context.limiter.close()
        await context.providers.close()
        context.pool.shutdown()
        context.password_checks.shutdown()
        context.metrics.close()
        await context.db.dispose()
        # A spool the database has not taken is left for the next start to replay.
        spooling = context.request_log.spooling
        await asyncio.to_thread(workdir.release if spooling else workdir.remove)


def _include_routers(app: FastAPI) -> None:
    api = APIRouter(prefix=API_PREFIX)
    api.include_router(speech_router)
    api.include_router(transcription_router)
    api.include_router(jobs_router)
    api.include_router(webhooks_router)
    api.include_router(voices_router)
    api.include_router(pronunciation_router)
    api.include_router(models_router)
    api.include_router(cloning_router)
    api.include_router(usage_router)
    api.include_router(requests_router)
    api.include_router(realtime_native_router)
    app.include_router(api)
    app.include_router(openai_router)
    app.include_router(realtime_openai_router)
    app.include_router(docs_router(API_PREFIX))
    app.include_router(reference_router(API_PREFIX))
    app.include_router(health_router)
    app.include_router(metrics_router)


def _add_middleware(app: FastAPI, context: AppContext) -> None:
    # Added last runs first: the request id and log wrap everything but the console's
    # headers, the body guard wraps routes.
    settings = context.settings
    app.add_middleware(
        RequestBodyMiddleware,
        max_bytes=settings.max_upload_bytes + MULTIPART_OVERHEAD_BYTES,
        advertised_bytes=settings.max_upload_bytes,
        idle_timeout=settings.body_timeout_seconds,
        larger={
            API_PREFIX + JOBS_PATH: (
                settings.job_max_upload_bytes + MULTIPART_OVERHEAD_BYTES,
                settings.job_max_upload_bytes,
            )
        },
    )
    app.add_middleware(RepeatedQueryMiddleware)
    app.add_middleware(HeadAsGetMiddleware)
    app.add_middleware(RequestContextMiddleware, books=context.books)
    # Outermost: the console's headers reach whatever answers a console request, the
    # request middleware's 500 included.
    app.add_middleware(ConsoleHeadersMiddleware)


def _claim_workdir(settings: Settings) -> tuple[ProcessDir, LogSpool]:
    """This process's own directory, and its spool holding those of dead processes."""
    workdir = ProcessDir.claim(settings.data_dir)
    spool = LogSpool(workdir.spool, settings.log_spool_max_bytes)
    for orphan in claim_orphans(settings.data_dir):
        if orphan.spool.exists():
            spool.adopt(orphan.spool)
        orphan.remove()
    return workdir, spool
