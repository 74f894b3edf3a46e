"""Every job test on a database of its own (its queue holds only its jobs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.app import make_settings
from voice_service.settings import Settings


@pytest.fixture
def settings(tmp_path: Path, own_database: str) -> Settings:
    return make_settings(tmp_path, own_database)
