"""The admin CLI as an operator runs it: on a database a `serve` has made, or as a newcomer
runs it, in a directory of its own with nothing configured."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.app import TEST_PEPPER
from voice_service.kit.db import run_in_transaction
from voice_service.settings import Settings

# The script `pip install` puts beside the interpreter: what the README runs.
SCRIPT = Path(sys.executable).parent / "voice-service"


def admin_env(settings: Settings) -> dict[str, str]:
    """VOICE_SERVICE_* for the CLI on `settings`' database, which is made and migrated
    first, as the first `serve` would (the CLI refuses a database that does not exist)."""
    asyncio.run(run_in_transaction(settings, _nothing))
    return {
        "VOICE_SERVICE_DATA_DIR": str(settings.data_dir),
        "VOICE_SERVICE_DATABASE_URL": settings.resolved_database_url,
        "VOICE_SERVICE_KEY_PEPPER": TEST_PEPPER,
    }


async def _nothing(_session: AsyncSession) -> None:
    return None


def unconfigured_env(**variables: str) -> dict[str, str]:
    """This process's environment without any VOICE_SERVICE_* (the suite's second pass
    sets a database and a Redis), plus `variables`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOICE_SERVICE_")}
    return {**env, **variables}


def voice_service(
    *args: str, cwd: Path, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`voice-service ARGS` run from `cwd`, as typed in a shell there."""
    return subprocess.run(  # noqa: S603
        [str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
