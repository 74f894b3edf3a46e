"""`voice-service serve --wyoming` as an operator runs it: the flag reaches every worker
process, which all listen on the port (the kernel spreads connections over them), and a
busy port is said at once."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from wyoming.info import Describe
from wyoming.tts import Synthesize

from tests.helpers.app import REDIS_URL
from tests.helpers.cli import unconfigured_env, voice_service
from tests.helpers.ports import free_port
from tests.helpers.servers import running_server
from tests.helpers.waiting import eventually
from tests.helpers.wyoming import connected, read_until, send


def test_a_busy_wyoming_port_is_refused_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = voice_service(
            "serve",
            "--port",
            str(free_port()),
            "--wyoming",
            f"{port}=key_0123456789abcdef01234567",
            cwd=tmp_path,
            env=unconfigured_env(),
        )
    assert done.returncode == 1
    assert f"port {port} is in use" in done.stderr and "--wyoming" in done.stderr
    assert done.stdout == ""


async def _requests(port: int) -> list[str | None]:
    async def one(index: int) -> str | None:
        async with connected(port) as client:
            await send(client, Describe(), Synthesize(f"Number {index}."))
            await read_until(client, "info")
            answer = await read_until(client, "audio-stop")
        return None if answer.error is None else answer.error["code"]

    return await asyncio.gather(*(one(index) for index in range(8)))


def test_serve_with_a_wyoming_listener(tmp_path: Path) -> None:
    with running_server(tmp_path) as first:  # the first start makes the key to bind
        (key,) = first.cli("keys", "list", first.org_id)
    workers = 2 if REDIS_URL else 1  # several workers share their rate limits in Redis
    port = free_port()
    with running_server(
        tmp_path, workers=workers, redis_url=REDIS_URL, wyoming=f"{port}={key['id']}"
    ) as server:
        assert asyncio.run(_requests(port)) == [None] * 8
        sql = "SELECT path, status FROM request_log WHERE method = 'WYOMING' ORDER BY path"

        def logged() -> list[tuple[str, int]]:  # a describe's row comes with a later batch
            rows = [(row["path"], row["status"]) for row in server.query(sql)]
            return rows if len(rows) == 16 else []

        rows = eventually(logged)
    assert rows == [("/wyoming/describe", 200)] * 8 + [("/wyoming/synthesize", 200)] * 8
