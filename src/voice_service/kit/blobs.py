"""Where the service keeps files: clones' consented samples, idempotent requests' answers and
transcription jobs' audio, in the database (default) or an S3-compatible bucket.

Every node of a cluster reaches either, so a delete through any node removes the sample.
Samples are kept only as the consented record; synthesis uses the profile in `voices`.

The interface follows the clone and delete flows:

    async with store.saving(org_id, voice_id, path) as save, transaction(sessions) as session:
        ...                      # insert the voice and its usage row
        await save(session)      # the sample joins the clone's transaction

    async with transaction(sessions) as session:
        await delete_clone(session, org_id, voice_id)  # drops a database sample
    await store.deleted(org_id, voice_id)             # after the commit

The database store inserts the sample in the clone's transaction, so a failed clone leaves
nothing. The S3 store uploads before the transaction (never while it holds the org's clone
lock) and deletes the object again if the voice did not commit; it deletes a deleted voice's
object only after the commit, so a rolled-back delete keeps it. A crash between the two steps
leaves an object without a live voice: `sweep`, run at every start, removes those.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, TypeVar
from urllib.parse import urlsplit

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.core.errors import ProviderError
from voice_service.core.models import BlobChunk, VoiceSample, utcnow
from voice_service.kit.db import transaction
from voice_service.settings import Settings

logger = logging.getLogger(__name__)

T = TypeVar("T")
SaveStep = Callable[[AsyncSession], Awaitable[None]]
# (org id, voice id) of those of the voice ids that are live clones: the sweep's question,
# which the clones' repository answers.
LiveClones = Callable[[AsyncSession, Collection[str]], Awaitable[set[tuple[str, str]]]]

# An object younger than this may belong to a clone still committing on another node.
ORPHAN_GRACE = timedelta(hours=1)
# Files go into the database this big a row, and a few rows a transaction.
FILE_CHUNK_BYTES = 1024 * 1024
CHUNKS_PER_COMMIT = 8
# Short, so an unreachable store costs a clone seconds (then 502), not a hung request.
S3_TIMEOUT_SECONDS = 5.0
S3_MAX_ATTEMPTS = 2


class BlobStore(ABC):
    @abstractmethod
    def saving(
        self, org_id: str, voice_id: str, sample: Path
    ) -> AbstractAsyncContextManager[SaveStep]:
        """Wraps the clone's transaction; the step it yields runs inside that transaction.
        Raises ProviderError when the store fails (nothing is then committed or billed)."""

    @abstractmethod
    async def sample(self, org_id: str, voice_id: str) -> bytes:
        """The clone's sample, as uploaded; LookupError if none is kept. Raises
        ProviderError when the store fails."""

    @abstractmethod
    async def deleted(self, org_id: str, voice_id: str) -> None:
        """The voice's delete has committed: remove what the transaction could not."""

    @abstractmethod
    async def sweep(self, grace: timedelta | None = None) -> int:
        """Remove samples older than `grace` (default ORPHAN_GRACE) whose voice is not
        live; returns how many."""

    # Idempotent requests' answers are kept where the samples are (books/idempotency/).

    @abstractmethod
    async def keep_answer(self, name: str, body: bytes) -> bool:
        """Keep an answer under `name`; False when this store keeps answers in the
        database (in their idempotency row, which the caller writes)."""

    @abstractmethod
    async def answer(self, name: str) -> bytes:
        """An answer `keep_answer` kept."""

    @abstractmethod
    async def drop_answer(self, name: str) -> None:
        """Delete a kept answer; one already gone is fine."""

    # Files of up to a GiB (a job's audio), streamed in and out a chunk at a time.

    @abstractmethod
    async def put_file(self, name: str, path: Path) -> None:
        """Keep the file at `path` as `name`. Raises ProviderError when the store fails."""

    @abstractmethod
    async def get_file(self, name: str, path: Path) -> None:
        """Write the file kept as `name` to `path`; LookupError if there is none."""

    @abstractmethod
    async def drop_file(self, name: str) -> None:
        """Delete a kept file; one already gone is fine."""

    @abstractmethod
    async def file_names(self, prefix: str, older_than: datetime) -> list[str]:
        """The names under `prefix` of files kept before `older_than` (for a sweep)."""


class DatabaseBlobStore(BlobStore):
    """Samples in `voice_samples`, inserted and (by the clone's delete) deleted in
    the voice's own transactions: nothing to clean up, ever. The sample is read before the
    transaction; it is at most the upload cap (25 MiB by default). Files are rows of
    `blob_chunks`, a MiB each."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    @asynccontextmanager
    async def saving(self, org_id: str, voice_id: str, sample: Path) -> AsyncIterator[SaveStep]:
        content = await asyncio.to_thread(sample.read_bytes)

        async def save(session: AsyncSession) -> None:
            session.add(VoiceSample(voice_id=voice_id, org_id=org_id, content=content))

        yield save

    async def sample(self, org_id: str, voice_id: str) -> bytes:
        async with self._sessions() as session:
            content = await session.scalar(
                select(VoiceSample.content).where(
                    VoiceSample.voice_id == voice_id, VoiceSample.org_id == org_id
                )
            )
        if content is None:
            raise LookupError(f"no sample of {voice_id}")
        return content

    async def deleted(self, org_id: str, voice_id: str) -> None:
        pass  # the clone's delete removed the row in its own transaction

    async def sweep(self, grace: timedelta | None = None) -> int:
        return 0  # a row never outlives its voice's transactions

    async def keep_answer(self, name: str, body: bytes) -> bool:
        return False

    async def answer(self, name: str) -> bytes:
        raise LookupError(f"answers are kept in the database, not as {name!r}")

    async def drop_answer(self, name: str) -> None:
        pass

    async def put_file(self, name: str, path: Path) -> None:
        # A few chunks a transaction: SQLite's one writer is never held for a whole GiB.
        with path.open("rb") as source:
            seq = 0
            while chunks := await asyncio.to_thread(_read_chunks, source, CHUNKS_PER_COMMIT):
                async with transaction(self._sessions) as session:
                    for content in chunks:
                        session.add(BlobChunk(name=name, seq=seq, content=content))
                        seq += 1

    async def get_file(self, name: str, path: Path) -> None:
        with path.open("wb") as target:
            seq = 0
            while True:
                async with self._sessions() as session:
                    content = await session.scalar(
                        select(BlobChunk.content).where(
                            BlobChunk.name == name, BlobChunk.seq == seq
                        )
                    )
                if content is None:
                    break
                await asyncio.to_thread(target.write, content)
                seq += 1
        if seq == 0:
            raise LookupError(f"no file {name!r}")

    async def drop_file(self, name: str) -> None:
        async with transaction(self._sessions) as session:
            await session.execute(delete(BlobChunk).where(BlobChunk.name == name))

    async def file_names(self, prefix: str, older_than: datetime) -> list[str]:
        async with self._sessions() as session:
            names = await session.scalars(
                select(BlobChunk.name).where(
                    BlobChunk.name.startswith(prefix, autoescape=True),
                    BlobChunk.seq == 0,
                    BlobChunk.created_at < older_than,
                )
            )
            return list(names)


def _read_chunks(source: BinaryIO, count: int) -> list[bytes]:
    chunks: list[bytes] = []
    while len(chunks) < count and (chunk := source.read(FILE_CHUNK_BYTES)):
        chunks.append(chunk)
    return chunks


async def _nothing_to_save(_session: AsyncSession) -> None:
    pass


class S3BlobStore(BlobStore):
    """Samples as objects `<prefix>/<org_id>/<voice_id>` in an S3-compatible bucket.

    boto3 is synchronous: each call runs in a worker thread, with short timeouts and one
    retry, so a store that does not answer costs a clone seconds, then a 502."""

    def __init__(
        self,
        bucket: str,
        prefix: str,
        sessions: async_sessionmaker[AsyncSession],
        live_clones: LiveClones,
    ) -> None:
        try:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import BotoCoreError, ClientError
        except ImportError:
            raise RuntimeError(
                "VOICE_SERVICE_SAMPLE_STORE=s3://... needs boto3: pip install 'voice-service[s3]'."
            ) from None
        config = Config(
            connect_timeout=S3_TIMEOUT_SECONDS,
            read_timeout=S3_TIMEOUT_SECONDS,
            retries={"max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"},
        )
        # Endpoint, credentials and region come from boto3's standard environment.
        self._client: Any = boto3.session.Session().client("s3", config=config)
        self._errors: tuple[type[Exception], ...] = (BotoCoreError, ClientError)
        self.bucket = bucket
        self.prefix = prefix
        self._sessions = sessions
        self._live_clones = live_clones

    def key(self, org_id: str, voice_id: str) -> str:
        return "/".join(part for part in (self.prefix, org_id, voice_id) if part)

    @asynccontextmanager
    async def saving(self, org_id: str, voice_id: str, sample: Path) -> AsyncIterator[SaveStep]:
        key = self.key(org_id, voice_id)
        await self._call(self._upload, key, sample)
        try:
            yield _nothing_to_save
        except BaseException:
            await self._discard(org_id, voice_id)
            raise

    async def sample(self, org_id: str, voice_id: str) -> bytes:
        try:
            return await asyncio.to_thread(self._read, self.key(org_id, voice_id))
        except self._errors as exc:
            if _not_found(exc):
                raise LookupError(f"no sample of {voice_id}") from exc
            logger.error("sample store s3://%s failed: %r", self.bucket, exc)
            raise ProviderError("The sample store failed; the request is safe to retry.") from exc

    def _read(self, key: str) -> bytes:
        body: bytes = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return body

    def _upload(self, key: str, sample: Path) -> None:
        with sample.open("rb") as body:  # streamed from the upload's temporary file
            self._client.put_object(Bucket=self.bucket, Key=key, Body=body)

    async def _discard(self, org_id: str, voice_id: str) -> None:
        """Delete the object of a clone that failed, unless the voice committed after all
        (a commit whose answer was lost raises, yet may have landed)."""
        key = self.key(org_id, voice_id)
        try:
            async with self._sessions() as session:
                if await self._live_clones(session, [voice_id]):
                    return
            await self._call(self._client.delete_object, Bucket=self.bucket, Key=key)
        except Exception:
            logger.warning("sample %s left for the start-up sweep", key, exc_info=True)

    async def deleted(self, org_id: str, voice_id: str) -> None:
        key = self.key(org_id, voice_id)
        try:
            await self._call(self._client.delete_object, Bucket=self.bucket, Key=key)
        except ProviderError:
            # The voice is deleted either way; the next start's sweep removes the object.
            logger.warning("sample %s left for the start-up sweep", key)

    async def sweep(self, grace: timedelta | None = None) -> int:
        """Run at start: a failing store is logged, not fatal (speech needs no samples)."""
        cutoff = utcnow() - (ORPHAN_GRACE if grace is None else grace)
        paginator = self._client.get_paginator("list_objects_v2")
        prefix = f"{self.prefix}/" if self.prefix else ""
        pages: Iterator[Mapping[str, Any]] = iter(
            paginator.paginate(Bucket=self.bucket, Prefix=prefix)
        )
        removed = 0
        try:
            # Page by page (1,000 keys each), so memory does not grow with the bucket.
            while (page := await self._call(next, pages, None)) is not None:
                removed += await self._sweep_page(page.get("Contents", []), cutoff)
        except ProviderError:  # the cause is logged; orphans wait for the next start
            logger.error("sample sweep of s3://%s/%s did not finish", self.bucket, prefix)
        if removed:
            logger.info("sample sweep removed %d orphaned samples", removed)
        return removed

    async def _sweep_page(self, objects: Sequence[Mapping[str, Any]], cutoff: datetime) -> int:
        candidates: dict[str, tuple[str, str]] = {}
        for obj in objects:
            owner = self._owner(obj["Key"])
            if owner is not None and obj["LastModified"] < cutoff:
                candidates[obj["Key"]] = owner
        if not candidates:
            return 0
        async with self._sessions() as session:
            live = await self._live_clones(session, {v for _, v in candidates.values()})
        orphans = [key for key, owner in candidates.items() if owner not in live]
        if not orphans:
            return 0
        answer = await self._call(
            self._client.delete_objects,
            Bucket=self.bucket,
            Delete={"Objects": [{"Key": key} for key in orphans], "Quiet": True},
        )
        return len(orphans) - len(answer.get("Errors", []))

    async def keep_answer(self, name: str, body: bytes) -> bool:
        key = self._answer_key(name)
        await self._call(self._client.put_object, Bucket=self.bucket, Key=key, Body=body)
        return True

    async def answer(self, name: str) -> bytes:
        key = self._answer_key(name)
        found = await self._call(self._client.get_object, Bucket=self.bucket, Key=key)
        body: bytes = await asyncio.to_thread(found["Body"].read)
        return body

    async def drop_answer(self, name: str) -> None:
        key = self._answer_key(name)
        await self._call(self._client.delete_object, Bucket=self.bucket, Key=key)

    async def put_file(self, name: str, path: Path) -> None:
        # boto3's managed transfer: a multipart upload read from disk a part at a time.
        await self._call(self._client.upload_file, str(path), self.bucket, self._file_key(name))

    async def get_file(self, name: str, path: Path) -> None:
        try:
            await asyncio.to_thread(
                self._client.download_file, self.bucket, self._file_key(name), str(path)
            )
        except self._errors as exc:
            if _not_found(exc):
                raise LookupError(f"no file {name!r}") from exc
            logger.error("sample store s3://%s failed: %r", self.bucket, exc)
            raise ProviderError("The file store failed; the job will be retried.") from exc

    async def drop_file(self, name: str) -> None:
        key = self._file_key(name)
        await self._call(self._client.delete_object, Bucket=self.bucket, Key=key)

    async def file_names(self, prefix: str, older_than: datetime) -> list[str]:
        start = self._file_key(prefix)
        paginator = self._client.get_paginator("list_objects_v2")
        pages: Iterator[Mapping[str, Any]] = iter(
            paginator.paginate(Bucket=self.bucket, Prefix=start)
        )
        names: list[str] = []
        base = len(self._file_key(""))
        while (page := await self._call(next, pages, None)) is not None:
            names.extend(
                obj["Key"][base:]
                for obj in page.get("Contents", [])
                if obj["LastModified"] < older_than
            )
        return names

    def _file_key(self, name: str) -> str:
        # Three levels under the prefix (files/<kind>/<name>): `_owner` skips them.
        return "/".join(part for part in (self.prefix, "files", name) if part)

    def _answer_key(self, name: str) -> str:
        # Three levels under the prefix: `_owner` (the samples' sweep) skips them.
        return "/".join(part for part in (self.prefix, "idempotency", name) if part)

    def _owner(self, key: str) -> tuple[str, str] | None:
        """(org id, voice id) of one of our keys; None for anything else under the prefix."""
        relative = key[len(self.prefix) + 1 :] if self.prefix else key
        parts = relative.split("/")
        if len(parts) != 2 or not all(parts):
            return None
        return parts[0], parts[1]

    async def _call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return await asyncio.to_thread(function, *args, **kwargs)
        except self._errors as exc:
            logger.error("sample store s3://%s failed: %r", self.bucket, exc)
            raise ProviderError("The sample store failed; the request is safe to retry.") from exc


def blob_store(
    settings: Settings, sessions: async_sessionmaker[AsyncSession], live_clones: LiveClones
) -> BlobStore:
    """The store VOICE_SERVICE_SAMPLE_STORE names (validated by Settings)."""
    if settings.sample_store is None:
        return DatabaseBlobStore(sessions)
    location = urlsplit(settings.sample_store)
    return S3BlobStore(location.netloc, location.path.strip("/"), sessions, live_clones)


def _not_found(exc: Exception) -> bool:
    error = getattr(exc, "response", {}).get("Error", {})
    return str(error.get("Code")) in {"404", "NoSuchKey", "NotFound"}
