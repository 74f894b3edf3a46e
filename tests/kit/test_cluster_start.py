"""Nodes starting on one database: one first organization, one key pepper, or no start."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers.app import fresh_database, make_settings, running
from tests.helpers.cli import admin_env, unconfigured_env, voice_service
from voice_service.app import create_app
from voice_service.cli import app as cli
from voice_service.cli.serve import _bootstrap
from voice_service.inference.engines import Engines
from voice_service.kit.cluster import ClusterMismatch
from voice_service.kit.db import run_in_transaction
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy
from voice_service.tenancy.keys import MissingPepper, load_pepper

NODES = 3

pytestmark = pytest.mark.anyio


def _start_node(url: str, data_dir: str, barrier: Barrier) -> dict[str, str]:
    settings = make_settings(Path(data_dir), url)
    barrier.wait()  # every node runs its start-up at the same moment
    return asyncio.run(run_in_transaction(settings, lambda s: _bootstrap(s, settings)))


def test_nodes_starting_together_make_exactly_one_first_organization(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as url:
        context = multiprocessing.get_context("spawn")
        barrier = context.Manager().Barrier(NODES)
        with context.Pool(NODES) as pool:
            args = [(url, str(tmp_path / f"node{i}"), barrier) for i in range(NODES)]
            starts = pool.starmap(_start_node, args)
        settings = make_settings(tmp_path, url)
        orgs = asyncio.run(run_in_transaction(settings, tenancy.count_orgs))
    made = [start for start in starts if "api_key" in start]
    assert len(made) == 1
    assert orgs == 1
    # The others name the organization instead of printing a key of their own.
    assert {start["org_id"] for start in starts} == {made[0]["org_id"]}


async def test_a_node_with_another_pepper_refuses_to_start(
    settings: Settings, engines: Engines
) -> None:
    async with running(create_app(settings, engines)):
        pass  # the cluster's pepper is recorded by its first node
    other = settings.model_copy(update={"key_pepper": "not-the-cluster-pepper"})
    with pytest.raises(ClusterMismatch, match="VOICE_SERVICE_KEY_PEPPER"):
        async with running(create_app(other, engines)):
            pass


def test_serve_and_keys_with_another_pepper_exit_with_a_message(settings: Settings) -> None:
    env = admin_env(settings)
    runner = CliRunner()
    org = runner.invoke(cli, ["orgs", "create", "Acme", "--json"], env=env)
    org_id = json.loads(org.stdout)["id"]
    key = runner.invoke(cli, ["keys", "create", org_id, "--json"], env=env)
    assert key.exit_code == 0, key.output  # the cluster's pepper is recorded
    other = unconfigured_env(**{**env, "VOICE_SERVICE_KEY_PEPPER": "other"})
    for args in (["serve", "--port", "0"], ["keys", "create", org_id]):
        # In a process of its own: a serve that got past its checks would keep serving
        # (the timeout then fails the test).
        refused = voice_service(*args, cwd=settings.data_dir, env=other)
        assert refused.returncode == 1, refused.stderr
        assert "key pepper is not the one" in refused.stderr


def test_a_shared_database_needs_the_cluster_pepper(tmp_path: Path) -> None:
    shared = Settings(
        data_dir=tmp_path,
        database_url="postgresql+asyncpg://voice@db.invalid/voice",
        key_pepper=None,
    )
    with pytest.raises(MissingPepper, match="VOICE_SERVICE_KEY_PEPPER is required"):
        load_pepper(shared)
    assert not (tmp_path / "key-pepper").exists()  # no pepper of its own was made
    embedded = Settings(data_dir=tmp_path, database_url=None, key_pepper=None)
    assert load_pepper(embedded) == (tmp_path / "key-pepper").read_text().encode()
