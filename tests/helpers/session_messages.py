"""A WebSocket session's messages from the node, as a client reads them: one at a time
within a patience, kept in order, until the node closes the session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection

PATIENCE = 120.0


class SessionMessages:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.seen: list[dict[str, Any]] = []

    async def next(self) -> dict[str, Any]:
        async with asyncio.timeout(PATIENCE):
            message: dict[str, Any] = json.loads(await self.ws.recv())
        self.seen.append(message)
        return message

    async def until(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first message `wanted` (those before it kept in `seen`)."""
        while not wanted(message := await self.next()):
            pass
        return message

    async def close_code(self) -> int | None:
        """The code the node closed with, once it has (messages before it read)."""
        try:
            while True:
                await self.next()
        except websockets.ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None

    @property
    def request_id(self) -> str:
        """The upgrade's request id (its log row)."""
        response = self.ws.response
        assert response is not None
        return response.headers["x-request-id"]
