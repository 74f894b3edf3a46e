"""The compose files docs/operations.md ships (compose.yaml, one node; deploy/compose/
cluster.yaml, two nodes over PostgreSQL and Redis behind nginx), read against what they run:
the image's Containerfile, the settings a node reads, and the shipped nginx configuration.
(No image registry is reachable here for PostgreSQL's, Redis's and nginx's images; the
nodes themselves run as these files run them in tests/deploy/test_image.py.)"""

from __future__ import annotations

import ipaddress
import re
import string
from pathlib import Path
from typing import Any

import yaml
from bench.nginx import NODE, SHIPPED

from voice_service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
ONE_NODE = ROOT / "compose.yaml"
CLUSTER = ROOT / "deploy" / "compose" / "cluster.yaml"
CONTAINERFILE = (ROOT / "Containerfile").read_text()
DATA = "/var/lib/voice-service"
ASKED = {"POSTGRES_PASSWORD": "pg-secret", "VOICE_SERVICE_KEY_PEPPER": "pepper-secret"}


def _interpolated(path: Path) -> dict[str, Any]:
    """The file as compose reads it, with the variables it requires given."""
    text = re.sub(r"\$\{(\w+):\?[^}]*\}", r"${\1}", path.read_text())
    loaded: dict[str, Any] = yaml.safe_load(string.Template(text).substitute(ASKED))
    return loaded


def _served_port() -> int:
    (port,) = re.findall(r'^CMD \[.*"--port", "(\d+)"\]$', CONTAINERFILE, re.MULTILINE)
    return int(port)


def _assert_builds_the_image(service: dict[str, Any], compose_file: Path) -> None:
    build = service["build"]
    context = (compose_file.parent / build["context"]).resolve()
    assert context == ROOT and build["dockerfile"] == "Containerfile"
    assert f"VOLUME {DATA}" in CONTAINERFILE
    # Longer than a drain takes (the Containerfile stops it with SIGTERM).
    grace = int(service["stop_grace_period"].removesuffix("s"))
    assert grace > Settings.model_fields["drain_timeout_seconds"].default


def test_the_one_node_file_serves_the_image_on_the_embedded_default() -> None:
    compose = _interpolated(ONE_NODE)
    (service,) = compose["services"].values()
    _assert_builds_the_image(service, ONE_NODE)
    assert service["ports"] == [f"127.0.0.1:8000:{_served_port()}"]
    (volume,) = service["volumes"]
    name, target = volume.split(":")
    assert target == DATA and name in compose["volumes"]
    assert "environment" not in service  # SQLite in the data volume


def test_the_cluster_files_nodes_share_its_database_and_redis_behind_the_shipped_nginx() -> None:
    compose = _interpolated(CLUSTER)
    services = compose["services"]
    nodes = {name: service for name, service in services.items() if name.startswith("node-")}
    assert len(nodes) == 2
    environments = [node["environment"] for node in nodes.values()]
    assert environments[0] == environments[1]
    environment = environments[0]
    for name, node in nodes.items():
        _assert_builds_the_image(node, CLUSTER)
        (volume,) = node["volumes"]
        assert volume == f"{name}-data:{DATA}"
        assert "ports" not in node  # reached through the proxy only
    # Every setting is one a node reads, and a node accepts them all.
    fields = {f"VOICE_SERVICE_{name.upper()}" for name in Settings.model_fields}
    assert set(environment) <= fields
    settings = Settings(
        **{k.removeprefix("VOICE_SERVICE_").lower(): v for k, v in environment.items()}
    )
    assert settings.redis_url == "redis://redis:6379/0" and "redis" in services
    database = settings.database_url or ""
    postgres = services["postgres"]["environment"]
    assert database == (
        f"postgresql+asyncpg://{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}"
        f"@postgres:5432/{postgres['POSTGRES_DB']}"
    )
    assert settings.key_pepper == ASKED["VOICE_SERVICE_KEY_PEPPER"]
    # The nodes believe X-Forwarded-For from the network the proxy is on, and nothing wider.
    (network,) = compose["networks"]["voice"]["ipam"]["config"]
    assert ipaddress.ip_network(environment["VOICE_SERVICE_FORWARDED_ALLOW_IPS"]) == (
        ipaddress.ip_network(network["subnet"])
    )
    assert services["proxy"]["networks"] == ["voice"]


def test_the_cluster_files_proxy_runs_the_shipped_configuration_on_both_nodes() -> None:
    proxy = _interpolated(CLUSTER)["services"]["proxy"]
    (mount,) = proxy["volumes"]
    source, target, mode = mount.split(":")
    assert (CLUSTER.parent / source).resolve() == SHIPPED and mode == "ro"
    script = proxy["command"][-1]
    (pattern, replacement) = re.findall(r"sed 's/(.*?)/(.*?)/'", script)[0]
    assert target in script
    shipped = SHIPPED.read_text()
    assert shipped.count(pattern) == 1 and pattern == NODE
    port = _served_port()
    assert replacement == f"server node-1:{port}; server node-2:{port};"
    assert "listen 80;" in shipped and proxy["ports"] == ["8000:80"]
