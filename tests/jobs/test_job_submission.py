"""A job's upload is measured before it is accepted, below every request: refused at once
when its container states it is too long, or when it holds a non-number, and while
uploads are measured a speech request never waits for a worker, by the pool's own count."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.audio.long_files import ogg_stating, unstated_webm
from tests.helpers.api import assert_error, speak, usage_units
from tests.helpers.app import Tenant, Tenants, running
from tests.helpers.jobs import submit
from tests.helpers.wav import float_wav
from voice_service.app import create_app
from voice_service.core.vocabulary import Capability
from voice_service.inference.engines import Engines
from voice_service.inference.pool import InferencePool
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

HOUR = 3600


async def no_job_and_no_usage(client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants) -> None:
    assert (await client.get("/transcription-jobs", headers=tenant.headers)).json()["jobs"] == []
    assert await usage_units(tenants, tenant.org_id) == []


async def test_a_recording_whose_container_states_past_the_limit_is_refused_undecoded(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, tmp_path: Path
) -> None:
    # Its last Ogg page says 5 h; its packets hold 1.2 s, so decoding alone would accept it.
    path = ogg_stating(tmp_path / "states-5h.ogg", stated_seconds=5 * HOUR, holding_seconds=1.2)
    refused = await submit(client, tenant, path.read_bytes())
    error = assert_error(refused, 400, "INVALID_REQUEST")
    assert "longer than the 14400 s" in error["message"]
    await no_job_and_no_usage(client, tenant, tenants)


@pytest.mark.parametrize("value", [np.nan, np.inf])
async def test_a_float_wav_ending_in_a_non_number_is_refused_at_submission(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, value: float
) -> None:
    audio = float_wav(np.concatenate([np.zeros(16_000), [value]]))
    refused = await submit(client, tenant, audio)
    error = assert_error(refused, 400, "INVALID_REQUEST")
    assert "not numbers" in error["message"]
    await no_job_and_no_usage(client, tenant, tenants)


def measuring(pool: InferencePool) -> int:
    """Speech-to-text steps holding a worker or waiting for one: here, uploads measured."""
    queue = pool.queues()[Capability.SPEECH_TO_TEXT]
    return queue["waiting"] + queue["running"]


async def test_a_speech_request_never_waits_while_two_uploads_are_measured(
    settings: Settings, engines: Engines, tmp_path: Path
) -> None:
    # Two workers; two uploads whose length only decoding finds (no header states it),
    # each an hour past the limit, so each is measured for as long as the limit allows.
    limited = settings.model_copy(update={"pool_size": 2, "job_max_audio_seconds": 3 * HOUR})
    audio = unstated_webm(tmp_path / "4h.webm", 4 * HOUR).read_bytes()
    tenant = await Tenants(limited).create()
    app = create_app(limited, engines)
    async with running(app) as client:
        pool: InferencePool = app.state.context.pool
        before = pool.waited_steps()
        uploads = [asyncio.create_task(submit(client, tenant, audio)) for _ in range(2)]
        async with asyncio.timeout(120):
            while measuring(pool) < 2:  # noqa: ASYNC110 (the pool's state, set by its threads)
                await asyncio.sleep(0.01)
        spoken = await speak(client, tenant, "Hello there.")
        after = pool.waited_steps()
        assert spoken.status_code == 200, spoken.text
        # The request took a free worker at once: the measuring left one for it, ...
        assert (after["first"], after["later"]) == (before["first"], before["later"])
        assert not all(upload.done() for upload in uploads)  # ... measuring all along
        answers = await asyncio.gather(*uploads)

    assert after["batch"] > before["batch"]  # one measurement waited for the other
    for answer in answers:
        error = assert_error(answer, 400, "INVALID_REQUEST")
        assert "longer than the 10800 s" in error["message"]
