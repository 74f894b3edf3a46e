"""Uploads land in the process's own directory and leave nothing there, whatever the answer."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers.api import transcribe
from tests.helpers.app import Tenant
from tests.helpers.wav import silent_wav
from voice_service.web.context import AppContext

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("data", "language", "status"),
    [
        (silent_wav(16000, 16000), "en", 200),
        (b"not audio at all", None, 415),
        (silent_wav(16000, 16000), "xx", 400),
    ],
    ids=["transcribed", "not-audio", "bad-language"],
)
async def test_no_upload_file_outlives_its_request(
    app: FastAPI,
    client: httpx.AsyncClient,
    tenant: Tenant,
    data: bytes,
    language: str | None,
    status: int,
) -> None:
    context: AppContext = app.state.context
    response = await transcribe(client, tenant, data, language=language)
    assert response.status_code == status, response.text
    assert context.uploads_dir.is_dir()
    assert list(context.uploads_dir.iterdir()) == []
