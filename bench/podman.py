"""Debian's podman building the repository's Containerfile and running containers of it, as
docs/operations.md shows, on a machine with no image registry and no systemd: the base image
is made from Debian's packages (debootstrap, then `podman import`) and given as BASE_IMAGE.

The containers share the host's network (no port mapping to set up, and the host's
PostgreSQL and Redis at 127.0.0.1), so each node is told to listen on a loopback port of
its own."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.procs import answers_ready, free_port

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "localhost/voice-service:test"
BASE = "localhost/voice-service-test-base:bookworm"
USER_ID = 10001  # the Containerfile's voice-service user
# What podman needs in a sandbox without systemd or a delegated cgroup tree: runc rather
# than crun, cgroupfs, no ulimits it may not raise, the host's network.
CONTAINERS_CONF = """\
[containers]
default_ulimits = []
netns = "host"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
# The site's certificate authorities, so that pip in the build reaches PyPI as the host does.
HOST_TRUST = Path("/etc/ssl/certs/ca-certificates.crt")


class Podman:
    """podman with this machine's settings (a containers.conf in `directory`)."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("podman")
        assert binary, "podman is not installed (.ci/run installs it)"
        self.binary = binary
        directory.mkdir(parents=True, exist_ok=True)
        conf = directory / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CONTAINERS_CONF": str(conf)}

    def run(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """`podman ARGS`, its output captured; with `check`, one that fails is an error
        quoting podman's own words."""
        done = subprocess.run(
            [self.binary, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert not check or done.returncode == 0, f"podman {' '.join(args)}: {done.stderr[-3000:]}"
        return done

    def __call__(self, *args: str, timeout: float = 120) -> str:
        return self.run(*args, timeout=timeout).stdout

    def has_image(self, name: str) -> bool:
        return self.run("image", "exists", name, check=False).returncode == 0

    def size(self, name: str) -> int:
        return int(json.loads(self("image", "inspect", name))[0]["Size"])

    def debian_base(self, directory: Path) -> str:
        """Debian bookworm with Python 3.11 and its venv module, from Debian's packages
        (made once a machine, then reused)."""
        if self.has_image(BASE):
            return BASE
        debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
        assert Path(debootstrap).is_file(), "debootstrap is not installed (.ci/run installs it)"
        rootfs = directory / "rootfs"
        subprocess.run(
            [
                debootstrap,
                "--variant=minbase",
                "--include=python3,python3-venv,ca-certificates",
                "bookworm",
                str(rootfs),
                "http://deb.debian.org/debian",
            ],
            capture_output=True,
            check=True,
            timeout=900,
        )
        shutil.copyfile(HOST_TRUST, rootfs / "etc/ssl/certs/ca-certificates.crt")
        archive = ["tar", "-C", str(rootfs), "-c", "."]
        tar = subprocess.Popen(archive, stdout=subprocess.PIPE)
        try:
            subprocess.run(
                [self.binary, "import", "--quiet", "-", BASE],
                env=self.env,
                stdin=tar.stdout,
                capture_output=True,
                check=True,
                timeout=300,
            )
        finally:
            assert tar.stdout is not None
            tar.stdout.close()
            tar.wait()
        shutil.rmtree(rootfs)
        return BASE

    def build(self, base: str, log: Path) -> str:
        """The image from the repository's Containerfile on `base`; its build log in `log`."""
        with log.open("w") as output:
            subprocess.run(
                [
                    self.binary,
                    "build",
                    "--network=host",
                    # Docker's format keeps HEALTHCHECK, which OCI's has no field for.
                    "--format=docker",
                    f"--build-arg=BASE_IMAGE={base}",
                    f"--tag={IMAGE}",
                    str(ROOT),
                ],
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                check=True,
                timeout=1800,
            )
        return IMAGE


@dataclass(frozen=True)
class Container:
    name: str
    root: str
    first: dict[str, str]  # what `serve --json` printed: the first key on a first start

    @property
    def base_url(self) -> str:
        return f"{self.root}/api/v1"


@contextmanager
def running_container(
    podman: Podman,
    name: str,
    environment: dict[str, str],
    *,
    data_dir: Path | None = None,
) -> Iterator[Container]:
    """A container of the test image serving on a loopback port, ready; removed after.
    `data_dir`, when given, is the node's data volume (made the container user's)."""
    port = free_port()
    volume: list[str] = []
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        shutil.chown(data_dir, USER_ID, USER_ID)
        volume = [f"--volume={data_dir}:/var/lib/voice-service"]
    settings = [f"--env={key}={value}" for key, value in environment.items()]
    podman("run", "--detach", f"--name={name}", *volume, *settings, IMAGE,
           "serve", "--host", "127.0.0.1", "--port", str(port), "--json")  # fmt: skip
    root = f"http://127.0.0.1:{port}"
    try:
        first = _first_json(podman, name)
        _wait_ready(podman, name, root)
        yield Container(name, root, first)
    finally:
        podman.run("rm", "--force", "--time=0", name, check=False)


def logs(podman: Podman, name: str) -> tuple[str, str]:
    """What the container wrote to its stdout and its stderr."""
    done = podman.run("logs", name)
    return done.stdout, done.stderr


def _first_json(podman: Podman, name: str) -> dict[str, str]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        out, err = logs(podman, name)
        try:
            parsed: dict[str, str] = json.loads(out)
            return parsed
        except json.JSONDecodeError:
            time.sleep(0.3)
    raise AssertionError(f"{name} printed no JSON: {out!r} {err[-2000:]}")


def _wait_ready(podman: Podman, name: str, root: str) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if answers_ready(root):
            return
        time.sleep(0.05)
    raise AssertionError(f"{name} never became ready: {logs(podman, name)[1][-3000:]}")
