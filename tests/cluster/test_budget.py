"""The database connection budget: nodes whose pools could open more connections than the
server allows refuse to start and say why; a cluster within it serves."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cluster.harness import (
    DB_MAX_OVERFLOW,
    DB_POOL_SIZE,
    NODES,
    REDIS_URL,
    WORKERS,
    Cluster,
    Database,
    Node,
    node_env,
    requires_backends,
)
from tests.helpers.app import fresh_database

pytestmark = requires_backends

BUDGET_REDIS_DB = 2
QUICKLY = 60.0  # seconds: before any worker loads a model; generous for a loaded CI


def test_serve_refuses_pools_larger_than_max_connections_and_names_the_settings(
    tmp_path: Path,
) -> None:
    with fresh_database(tmp_path) as url:
        database = Database(url)
        try:
            max_connections = int(database.scalar("SHOW max_connections"))
        finally:
            database.close()
        redis = REDIS_URL.rsplit("/", 1)[0] + f"/{BUDGET_REDIS_DB}"
        # Each of the 2 workers may open pool + overflow connections: 4 x max_connections.
        oversized = str(max_connections)
        env = node_env(
            tmp_path / "data", url, redis, db_pool_size=oversized, db_max_overflow=oversized
        )
        node = Node("oversized", env, tmp_path / "node", WORKERS)
        node.start()
        try:
            assert node.process is not None
            code = node.process.wait(timeout=QUICKLY)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            node.stop()

    stderr = node.log.read_text(errors="replace")
    assert code not in (None, 0), f"serve went on (exit code {code}):\n{node.log_tail()}"
    assert "Application startup complete" not in stderr  # no worker got as far as serving
    named = stderr.lower()
    assert "max_connections" in named, stderr
    assert "pool_size" in named and "max_overflow" in named, stderr


def test_a_cluster_within_the_budget_starts_and_serves(cluster: Cluster) -> None:
    max_connections = int(cluster.db.scalar("SHOW max_connections"))
    assert max_connections >= NODES * WORKERS * (DB_POOL_SIZE + DB_MAX_OVERFLOW)
    for node in cluster.nodes:
        ready = node.readyz()
        assert ready.status == 200, ready
        assert ready.body.get("status") == "ready", ready
