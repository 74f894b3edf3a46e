"""Files the probe or decoder cannot use are refused with the envelope, never a 500.

A WAV whose header says 0 bits per sample once gave 500 (AttributeError in the probe) on
every audio endpoint; a float WAV of NaN or infinity kept Whisper busy for a minute and was
billed for "!!!!". Both are refused before any inference, and nothing is billed.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tests.helpers.api import ACCEPTED, assert_error, clone, transcribe, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.wav import float_wav, zero_bit_wav

pytestmark = pytest.mark.anyio

NOT_NUMBERS = "samples that are not numbers (NaN or infinity)"
# 32 KB of float32 samples, half a second at 16 kHz.
NAN_WAV = float_wav(np.full(8192, np.nan))
INF_WAV = float_wav(np.full(8192, np.inf))


@pytest.mark.parametrize("endpoint", ["/speech-to-text", "/asr"])
async def test_zero_bit_wav_is_415_on_transcription(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, endpoint: str
) -> None:
    response = await transcribe(client, tenant, zero_bit_wav(), endpoint=endpoint)
    assert ACCEPTED in assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")["message"]
    assert await usage_units(tenants, tenant.org_id) == []


async def test_zero_bit_wav_is_415_on_clone(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    response = await clone(client, tenant, zero_bit_wav())
    assert ACCEPTED in assert_error(response, 415, "UNSUPPORTED_MEDIA_TYPE")["message"]
    assert await usage_units(tenants, tenant.org_id) == []


@pytest.mark.parametrize("data", [NAN_WAV, INF_WAV], ids=["nan", "inf"])
async def test_non_finite_wav_is_400_and_not_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, data: bytes
) -> None:
    response = await transcribe(client, tenant, data, language="en")
    message = assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert message.startswith("file:") and NOT_NUMBERS in message
    assert await usage_units(tenants, tenant.org_id) == []


@pytest.mark.parametrize("data", [NAN_WAV, INF_WAV], ids=["nan", "inf"])
async def test_non_finite_wav_is_400_on_clone(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, data: bytes
) -> None:
    response = await clone(client, tenant, data)
    assert NOT_NUMBERS in assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert await usage_units(tenants, tenant.org_id) == []
