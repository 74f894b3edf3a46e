"""Events read off a Wyoming connection with the `wyoming` package's own parser, held to
bounds it does not set: a line, a data block and a payload of limited size, each arriving
within the idle timeout, so no client can make the node hold unbounded memory or a task
forever. A line that is not an event is told apart from a client that left."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

from wyoming.event import Event, async_read_event

MAX_PAYLOAD_BYTES = 1024 * 1024  # an audio chunk is a few kilobytes; a second of 48 kHz
# stereo 32-bit audio is 384 KB


@dataclass(frozen=True, slots=True)
class Unreadable:
    """The client sent what is not a Wyoming event (`reason` says how), or nothing for
    the idle timeout: the connection is answered with an error event and closed."""

    reason: str
    silent: bool = False  # nothing at all arrived: the client is idle, not broken


class Left:
    """The client closed its side (or the connection broke)."""


LEFT = Left()


class _BoundedReader:
    """What `async_read_event` calls of a stream reader, with bounds. A reason to stop
    raises `_Refused`, which the parser does not catch (it takes ValueError for a line
    that is not JSON, and answers None)."""

    def __init__(
        self, reader: asyncio.StreamReader, idle_seconds: float, first_within: float
    ) -> None:
        self._reader = reader
        self._idle = idle_seconds
        self._first_within = first_within  # for the event's first line
        self.at_eof = False

    async def readline(self) -> bytes:
        waited, self._first_within = self._first_within, self._idle
        try:
            async with asyncio.timeout(waited):
                line = await self._reader.readline()
        except ValueError:  # longer than the stream's limit: not a line of an event
            raise _Refused("a line longer than the protocol allows") from None
        except TimeoutError:
            raise _Refused(f"nothing arrived for {waited:g} s", silent=True) from None
        self.at_eof = not line
        return line

    async def readexactly(self, length: int) -> bytes:
        if not isinstance(length, int) or not 0 < length <= MAX_PAYLOAD_BYTES:
            raise _Refused(
                f"a data or payload length of {length} bytes (at most {MAX_PAYLOAD_BYTES})"
            )
        try:
            async with asyncio.timeout(self._idle):
                return await self._reader.readexactly(length)
        except TimeoutError:
            raise _Refused(
                f"{length} bytes announced and not sent within {self._idle:g} s"
            ) from None


class _Refused(Exception):
    def __init__(self, reason: str, *, silent: bool = False) -> None:
        super().__init__(reason)
        self.silent = silent


async def read_event(
    reader: asyncio.StreamReader, idle_seconds: float, first_within: float | None = None
) -> Event | Unreadable | Left:
    """The client's next event, its first line within `first_within` seconds (by default
    `idle_seconds`) and each later part within `idle_seconds`; or why there is none."""
    first = idle_seconds if first_within is None else first_within
    bounded = _BoundedReader(reader, idle_seconds, first)
    try:
        event = await async_read_event(cast(asyncio.StreamReader, bounded))
    except _Refused as refused:
        return Unreadable(str(refused), silent=refused.silent)
    except (asyncio.IncompleteReadError, ConnectionError):
        return LEFT
    except (KeyError, TypeError, AttributeError, RecursionError):  # JSON of another shape
        return Unreadable("a line that is not a Wyoming event")
    if event is not None:
        if not isinstance(event.type, str) or not isinstance(event.data, dict):
            return Unreadable("a line that is not a Wyoming event")
        return event
    return LEFT if bounded.at_eof else Unreadable("a line that is not a Wyoming event")
