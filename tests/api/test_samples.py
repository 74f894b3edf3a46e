"""Clone samples where every node reaches them: the database by default, or S3.

The S3 store runs against moto's standalone server, a real S3-protocol peer on localhost
started once for this module.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers import speech_clips as clips
from tests.helpers.api import assert_error, clone, raised_voice_sample, usage_units
from tests.helpers.app import Tenant, Tenants, make_settings, running
from tests.helpers.ports import free_port
from voice_service.app import create_app
from voice_service.books.idempotency.expiry import remove_expired
from voice_service.cloning import repository
from voice_service.core.models import IdempotencyEntry, Voice, VoiceSample, utcnow
from voice_service.inference.engines import Engines
from voice_service.kit import blobs
from voice_service.kit.blobs import S3BlobStore
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

PREFIX = "voice/samples"  # two levels, so keys are told apart from the prefix's own parts
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@pytest.fixture
def sample(tmp_path: Path) -> bytes:
    return raised_voice_sample(tmp_path)


@pytest.fixture
def silent_sample(tmp_path: Path) -> bytes:
    return clips.write_audio(tmp_path / "silence.wav", clips.silence(3.0), "wav-s16").read_bytes()


async def sample_rows(tenants: Tenants, org_id: str) -> list[VoiceSample]:
    rows = await tenants.run(
        lambda s: s.scalars(select(VoiceSample).where(VoiceSample.org_id == org_id))
    )
    return list(rows)


async def voice_rows(tenants: Tenants, org_id: str) -> list[Voice]:
    return list(await tenants.run(lambda s: s.scalars(select(Voice).where(Voice.org_id == org_id))))


# --- the database store (the default) ---------------------------------------------------


async def test_clone_keeps_the_exact_sample_in_the_database(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, sample: bytes
) -> None:
    voice_id = (await clone(client, tenant, sample)).json()["voice"]["id"]
    stored = await tenants.run(lambda s: s.get(VoiceSample, voice_id))
    voice = await tenants.run(lambda s: s.get(Voice, voice_id))
    assert stored is not None and voice is not None
    assert stored.content == sample and stored.org_id == tenant.org_id
    assert hashlib.sha256(stored.content).hexdigest() == voice.sample_sha256


async def test_delete_through_another_node_removes_the_sample(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    sample: bytes,
    settings: Settings,
    engines: Engines,
) -> None:
    voice_id = (await clone(client, tenant, sample)).json()["voice"]["id"]
    async with running(create_app(settings, engines)) as other_node:
        response = await other_node.delete(f"/voices/{voice_id}", headers=tenant.headers)
    assert response.status_code == 200
    assert await sample_rows(tenants, tenant.org_id) == []


class Rollback(Exception):
    pass


async def test_sample_goes_in_the_same_transaction_as_the_voice(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, sample: bytes
) -> None:
    voice_id = (await clone(client, tenant, sample)).json()["voice"]["id"]

    async def delete_then_roll_back(session: AsyncSession) -> None:
        assert await repository.delete_clone(session, tenant.org_id, voice_id)
        assert await session.get(VoiceSample, voice_id) is None
        raise Rollback

    with pytest.raises(Rollback):
        await tenants.run(delete_then_roll_back)
    # Rolled back together: the voice is live and its sample is still there.
    assert [row.voice_id for row in await sample_rows(tenants, tenant.org_id)] == [voice_id]


async def test_clones_refused_under_concurrency_leave_no_sample_row(
    client: httpx.AsyncClient, tenants: Tenants, sample: bytes
) -> None:
    tenant = await tenants.create(clone_limit=1)
    responses = await asyncio.gather(*(clone(client, tenant, sample) for _ in range(3)))
    assert sorted(r.status_code for r in responses) == [201, 400, 400]
    created = next(r for r in responses if r.status_code == 201).json()["voice"]["id"]
    assert [row.voice_id for row in await sample_rows(tenants, tenant.org_id)] == [created]


async def test_clone_without_speech_leaves_no_sample_row(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, silent_sample: bytes
) -> None:
    assert_error(await clone(client, tenant, silent_sample), 400, "INVALID_REQUEST")
    assert await sample_rows(tenants, tenant.org_id) == []


# --- the setting --------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["/var/samples", "file:///samples", "s3:///prefix", "bucket"])
def test_sample_store_other_than_s3_is_refused_at_start(tmp_path: Path, value: str) -> None:
    with pytest.raises(ValidationError, match="s3://bucket/prefix"):
        Settings(data_dir=tmp_path, sample_store=value)


@pytest.mark.parametrize(("value", "expected"), [("", None), ("s3://b", "s3://b")])
def test_sample_store_accepts_unset_and_s3(tmp_path: Path, value: str, expected: str) -> None:
    assert Settings(data_dir=tmp_path, sample_store=value).sample_store == expected


# --- the S3 store, against moto's server ------------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = (tmp_path_factory.mktemp("moto") / "server.log").open("w")
    server = subprocess.Popen(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(server, endpoint)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def wait_until_answering(server: subprocess.Popen[bytes], endpoint: str) -> None:
    for _ in range(600):
        if server.poll() is not None:
            raise RuntimeError(f"moto server exited with {server.returncode}")
        try:
            httpx.get(f"{endpoint}/moto-api/", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError("moto server did not answer")


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch, s3_endpoint: str) -> str:
    """boto3's standard environment, as an operator sets it, pointing at moto."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["aws_secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return s3_endpoint


@pytest.fixture
def s3(s3_endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **CREDENTIALS)


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"samples-{secrets.token_hex(6)}"
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_settings(tmp_path: Path, database_url: str, s3_env: str, bucket: str) -> Settings:
    return make_settings(tmp_path, database_url, sample_store=f"s3://{bucket}/{PREFIX}/")


@pytest.fixture
async def s3_app(s3_settings: Settings, engines: Engines) -> FastAPI:
    return create_app(s3_settings, engines)


@pytest.fixture
async def s3_client(s3_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with running(s3_app) as client:
        yield client


def s3_store(app: FastAPI) -> S3BlobStore:
    store = app.state.context.blobs
    assert isinstance(store, S3BlobStore)
    return store


def keys(s3: Any, bucket: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    return sorted(obj["Key"] for obj in listed)


async def test_s3_clone_stores_the_exact_sample_and_delete_removes_it(
    s3_client: httpx.AsyncClient,
    s3: Any,
    bucket: str,
    tenants: Tenants,
    tenant: Tenant,
    sample: bytes,
) -> None:
    voice_id = (await clone(s3_client, tenant, sample)).json()["voice"]["id"]
    key = f"{PREFIX}/{tenant.org_id}/{voice_id}"
    assert keys(s3, bucket) == [key]
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == sample
    assert await sample_rows(tenants, tenant.org_id) == []  # not in the database too

    response = await s3_client.delete(f"/voices/{voice_id}", headers=tenant.headers)
    assert response.status_code == 200
    assert keys(s3, bucket) == []


async def test_s3_clones_that_fail_leave_no_object(
    s3_client: httpx.AsyncClient,
    s3: Any,
    bucket: str,
    tenants: Tenants,
    sample: bytes,
    silent_sample: bytes,
) -> None:
    tenant = await tenants.create(clone_limit=1)
    responses = await asyncio.gather(*(clone(s3_client, tenant, sample) for _ in range(3)))
    assert sorted(r.status_code for r in responses) == [201, 400, 400]
    assert_error(await clone(s3_client, tenant, silent_sample), 400, "INVALID_REQUEST")
    created = next(r for r in responses if r.status_code == 201).json()["voice"]["id"]
    assert keys(s3, bucket) == [f"{PREFIX}/{tenant.org_id}/{created}"]


async def test_s3_keeps_idempotent_answers_beside_the_samples(
    s3_app: FastAPI,
    s3_client: httpx.AsyncClient,
    s3: Any,
    bucket: str,
    tenants: Tenants,
    tenant: Tenant,
    sample: bytes,
) -> None:
    headers = {**tenant.headers, "Idempotency-Key": "clone-once"}
    form = {"name": "Kept", "consent": "true"}
    files = {"file": ("sample.wav", sample, "audio/wav")}
    first = await s3_client.post("/voices/clone", headers=headers, data=form, files=files)
    again = await s3_client.post("/voices/clone", headers=headers, data=form, files=files)
    assert first.status_code == again.status_code == 201
    assert again.content == first.content and again.headers["Idempotent-Replayed"] == "true"
    voice_id = first.json()["voice"]["id"]
    answer = f"{PREFIX}/idempotency/{tenant.org_id}/{first.headers['X-Request-ID']}"
    assert keys(s3, bucket) == sorted([f"{PREFIX}/{tenant.org_id}/{voice_id}", answer])
    assert s3.get_object(Bucket=bucket, Key=answer)["Body"].read() == first.content
    entry = await tenants.run(lambda s: s.get(IdempotencyEntry, (tenant.org_id, "clone-once")))
    assert entry is not None and entry.body_in_store and entry.body is None
    assert await usage_units(tenants, tenant.org_id) == [("voices/clone", 1)]

    # The sweep of orphaned samples leaves answers alone; expiry removes them.
    assert await s3_store(s3_app).sweep(grace=timedelta(0)) == 0
    context = s3_app.state.context
    later = utcnow() + timedelta(days=2)
    assert await remove_expired(context.sessions, context.blobs, lambda: later) >= 1
    assert keys(s3, bucket) == [f"{PREFIX}/{tenant.org_id}/{voice_id}"]


async def fail_while_saving(
    store: S3BlobStore, org_id: str, voice_id: str, path: Path, s3: Any, seen: list[str]
) -> None:
    """A clone whose transaction fails after the upload; `seen` gets the bucket's keys then."""
    async with store.saving(org_id, voice_id, path):
        seen.extend(keys(s3, store.bucket))
        raise Rollback


async def test_s3_object_of_a_transaction_that_failed_is_deleted(
    s3_app: FastAPI, s3: Any, bucket: str, tenant: Tenant, sample: bytes, tmp_path: Path
) -> None:
    # Deterministic where the concurrent clones above may fail at the early check instead.
    path = tmp_path / "sample.wav"
    path.write_bytes(sample)
    seen: list[str] = []
    with pytest.raises(Rollback):
        await fail_while_saving(s3_store(s3_app), tenant.org_id, "voice_failed", path, s3, seen)
    assert seen == [f"{PREFIX}/{tenant.org_id}/voice_failed"]  # uploaded before the commit
    assert keys(s3, bucket) == []


async def test_s3_object_of_a_voice_that_committed_is_kept_on_a_late_error(
    s3_client: httpx.AsyncClient,
    s3_app: FastAPI,
    s3: Any,
    bucket: str,
    tenant: Tenant,
    sample: bytes,
    tmp_path: Path,
) -> None:
    # A commit whose answer was lost raises, yet may have landed: the object must stay.
    voice_id = (await clone(s3_client, tenant, sample)).json()["voice"]["id"]
    path = tmp_path / "sample.wav"
    path.write_bytes(sample)
    with pytest.raises(Rollback):
        await fail_while_saving(s3_store(s3_app), tenant.org_id, voice_id, path, s3, [])
    assert keys(s3, bucket) == [f"{PREFIX}/{tenant.org_id}/{voice_id}"]


async def orphans_and_a_live_clone(
    client: httpx.AsyncClient, s3: Any, bucket: str, tenant: Tenant, sample: bytes
) -> tuple[list[str], list[str]]:
    """A live clone, a deleted clone whose object a crash left, an object without any voice,
    and a key that is not a sample's; returns (keys to keep, keys to sweep)."""
    live, deleted = [(await clone(client, tenant, sample)).json()["voice"]["id"] for _ in range(2)]
    await client.delete(f"/voices/{deleted}", headers=tenant.headers)
    swept = [f"{PREFIX}/{tenant.org_id}/{deleted}", f"{PREFIX}/{tenant.org_id}/voice_crashed"]
    for key in [*swept, f"{PREFIX}/notes.txt"]:
        s3.put_object(Bucket=bucket, Key=key, Body=b"left behind")
    kept = [f"{PREFIX}/{tenant.org_id}/{live}", f"{PREFIX}/notes.txt"]
    return sorted(kept), swept


async def test_sweep_removes_old_orphans_and_keeps_the_rest(
    s3_client: httpx.AsyncClient,
    s3_app: FastAPI,
    s3: Any,
    bucket: str,
    tenant: Tenant,
    sample: bytes,
) -> None:
    kept, swept = await orphans_and_a_live_clone(s3_client, s3, bucket, tenant, sample)
    store = s3_store(s3_app)
    # Within the grace period they may be clones still committing on another node.
    assert await store.sweep() == 0
    assert keys(s3, bucket) == sorted(kept + swept)
    assert await store.sweep(grace=timedelta(0)) == len(swept)
    assert keys(s3, bucket) == kept


async def test_start_up_sweeps_orphans(
    s3_client: httpx.AsyncClient,
    s3_settings: Settings,
    engines: Engines,
    s3: Any,
    bucket: str,
    tenant: Tenant,
    sample: bytes,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept, _swept = await orphans_and_a_live_clone(s3_client, s3, bucket, tenant, sample)
    monkeypatch.setattr(blobs, "ORPHAN_GRACE", timedelta(0))
    async with running(create_app(s3_settings, engines)):
        assert keys(s3, bucket) == kept


async def test_unreachable_store_fails_the_clone_and_bills_nothing(
    s3_settings: Settings,
    engines: Engines,
    monkeypatch: pytest.MonkeyPatch,
    tenants: Tenants,
    tenant: Tenant,
    sample: bytes,
) -> None:
    # A bound socket that never listens: connections are refused, and the port stays ours.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed.getsockname()[1]}")
        # The start-up sweep fails too: logged, and the node serves all the same.
        async with running(create_app(s3_settings, engines)) as client:
            response = await clone(client, tenant, sample)
    assert "sample store" in assert_error(response, 502, "PROVIDER_ERROR")["message"]
    assert await usage_units(tenants, tenant.org_id) == []
    assert await voice_rows(tenants, tenant.org_id) == []
