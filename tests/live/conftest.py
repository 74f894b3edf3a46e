"""A real HTTP server in this process for each module that asks for `live` (see
tests/helpers/live.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.app import make_settings
from tests.helpers.live import LiveServer, serving
from voice_service.inference.engines import Engines


@pytest.fixture(scope="module")
def live(
    engines: Engines, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path_factory.mktemp("live"), database_url)
    with serving(settings, engines) as server:
        yield server
