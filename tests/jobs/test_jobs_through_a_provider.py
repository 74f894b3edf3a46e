"""A node with no Whisper of its own sends a job's pieces to its provider several at once,
as many as the provider takes but one (left for requests), and puts the transcript together
in the order of the audio, whichever piece comes back first."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.app import Tenant, make_settings
from tests.helpers.faulty_upstream import Answer, FaultyUpstream, faulty_upstream
from tests.helpers.jobs import conversation, settled, submit, wav_bytes
from tests.helpers.upstreams import providers_file
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

MAX_CONCURRENCY = 3  # the provider's: a job sends two pieces at once

PIECE = json.dumps(
    {
        "text": "a piece",
        "language": "english",
        "segments": [{"start": 0.25, "end": 1.5, "text": "a piece"}],
    }
).encode()


@pytest.fixture
def upstream() -> Iterator[FaultyUpstream]:
    with faulty_upstream() as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path, own_database: str, upstream: FaultyUpstream) -> Settings:
    toml = f"""
[[provider]]
name = "upstream-whisper"
kind = "openai"
base_urls = ["{upstream.root}/v1"]
max_concurrency = {MAX_CONCURRENCY}
timeout_seconds = 300  # a held answer is not given up on (and sent again)

[provider.transcription]
languages = ["*"]
"""
    path = providers_file(tmp_path / "providers.toml", toml)
    return make_settings(tmp_path, own_database, stt_engines="", providers_file=str(path))


async def arrived(upstream: FaultyUpstream, count: int) -> None:
    async with asyncio.timeout(120):
        while len(upstream.requests) < count:  # noqa: ASYNC110 (another thread's server)
            await asyncio.sleep(0.05)


async def test_pieces_go_upstream_two_at_once_and_come_back_in_order(
    client: httpx.AsyncClient, tenant: Tenant, upstream: FaultyUpstream
) -> None:
    held = Answer(200, "application/json", (PIECE,), hold_after=0)
    upstream.will(held, held, *[Answer(200, "application/json", (PIECE,))] * 20)
    job = (await submit(client, tenant, wav_bytes(conversation(2)), language="en")).json()

    await arrived(upstream, 2)  # both pieces sent while neither has been answered
    await asyncio.sleep(1)  # and no third: each answer is held
    assert len(upstream.requests) == 2
    shown = (await client.get(f"/transcription-jobs/{job['id']}", headers=tenant.headers)).json()
    assert shown["progress_seconds"] == 0
    upstream.release()

    done = await settled(client, tenant, job["id"])
    assert done["status"] == "completed", done
    segments = done["result"]["segments"]
    assert len(segments) == len(upstream.requests) >= 4  # one per piece with speech
    starts = [segment["start"] for segment in segments]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    assert done["result"]["text"] == " ".join(["a piece"] * len(segments))
    assert all(r.path == "/v1/audio/transcriptions" for r in upstream.requests)
