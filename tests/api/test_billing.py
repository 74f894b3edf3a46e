"""Transcription usage over HTTP: one unit per started second, counted in whole samples.

A float sum of frame durations once billed a 5.000 s 16 kHz WAV 6 units and a 2.000 s
8 kHz WAV 3. Silent clips with a language hint keep Whisper's share of the test small.
"""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.api import transcribe, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.wav import silent_wav

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("rate", "samples", "units"),
    [(16000, 5 * 16000, 5), (8000, 2 * 8000, 2), (8000, 2 * 8000 + 1, 3)],
    ids=["5.000s-16kHz", "2.000s-8kHz", "2s-and-1-sample-8kHz"],
)
async def test_asr_bills_started_seconds_exactly(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    rate: int,
    samples: int,
    units: int,
) -> None:
    data = silent_wav(samples, rate)
    response = await transcribe(client, tenant, data, language="en", endpoint="/asr")
    assert response.status_code == 200, response.text
    assert await usage_units(tenants, tenant.org_id) == [("asr", units)]


async def test_speech_to_text_bills_whole_seconds_exactly(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    data = silent_wav(5 * 44100, 44100)
    response = await transcribe(client, tenant, data, language="en")
    assert response.status_code == 200, response.text
    assert await usage_units(tenants, tenant.org_id) == [("speech-to-text", 5)]
