"""The node's Wyoming listeners (`VOICE_SERVICE_WYOMING`), beside its HTTP API: started with
the app, each bound to one API key, announced over zeroconf when asked, drained when the
node stops.

Each listener is the `wyoming` package's TCP server. With several worker processes, each
process listens on the same port (SO_REUSEPORT) and the kernel spreads connections over
them. Connections count against the node's `VOICE_SERVICE_MAX_CONNECTIONS` and their
listener's `VOICE_SERVICE_WYOMING_MAX_CONNECTIONS` (a client over either gets an `error`
event at once) and in /metrics. Wyoming asks no credential, so one listener's clients must
not take another's connections: each listener keeps a reserve of the node's connections
that only it may use, and a connection that makes no request for the idle timeout is
closed however often it pings. A stopping node takes no new connection or request; a
request under way finishes within the drain timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from functools import partial

from wyoming.server import AsyncEventHandler, AsyncTcpServer, HandlerFactory
from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from voice_service.core.errors import ApiError, ProviderError
from voice_service.settings import WyomingBinding
from voice_service.tenancy.principal import principal_of_key
from voice_service.web.context import AppContext
from voice_service.wyoming.connection import Connection
from voice_service.wyoming.handler import STOPPING, WyomingHandler

logger = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."


class Listener(AsyncTcpServer):
    """One listener: the package's TCP server, which can stop taking connections while
    those it took finish, and share its port with the node's other processes."""

    def __init__(self, binding: WyomingBinding, *, shared: bool) -> None:
        super().__init__(binding.host, binding.port)
        self.binding = binding
        self._shared = shared
        self._listening: asyncio.Server | None = None
        self.open = 0  # connections being served

    async def start(self, handler_factory: HandlerFactory) -> None:
        self._listening = await asyncio.start_server(
            partial(self._handler_callback, handler_factory),
            host=self.host,
            port=self.port,
            reuse_port=self._shared or None,
        )

    @property
    def port_bound(self) -> int:
        assert self._listening is not None
        port: int = self._listening.sockets[0].getsockname()[1]
        return port

    def stop_accepting(self) -> None:
        if self._listening is not None:
            self._listening.close()

    @property
    def handlers(self) -> list[AsyncEventHandler]:
        return list(self._handlers.values())

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._handlers)


class WyomingListeners:
    def __init__(self, context: AppContext) -> None:
        self._context = context
        settings = context.settings
        shared = settings.workers > 1
        self.listeners = [
            Listener(binding, shared=shared) for binding in settings.wyoming_listeners
        ]
        self._capacity = max(1, settings.max_connections // max(1, settings.workers))
        self._per_listener = settings.wyoming_max_connections
        # Half the node's connections are kept, in equal shares, for listeners that use
        # fewer; the other half go to whichever listener asks first.
        self._reserve = min(self._per_listener, self._capacity // (2 * max(1, len(self.listeners))))
        self.open = 0  # connections being served, on every listener
        self.stopping = asyncio.Event()
        self._zeroconf: AsyncZeroconf | None = None

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """(host, port) of each listener, as bound (a port of 0 is the one chosen)."""
        return [(listener.host, listener.port_bound) for listener in self.listeners]

    @property
    def under_way(self) -> int:
        """Streamed requests (a synthesis, a transcription) between their events."""
        return sum(
            isinstance(handler, WyomingHandler) and handler.busy
            for listener in self.listeners
            for handler in listener.handlers
        )

    async def start(self) -> None:
        for listener in self.listeners:
            await self._warn_unless_usable(listener.binding)
            await listener.start(partial(self._handler, listener))
            logger.info(
                "Wyoming listener on %s:%d for key %s",
                listener.host,
                listener.port_bound,
                listener.binding.key_id,
            )
        if self._context.settings.wyoming_zeroconf:
            await self._announce()

    async def stop(self, drain_seconds: float) -> None:
        """Take nothing new; let requests under way finish within `drain_seconds`; close."""
        self.stopping.set()
        for listener in self.listeners:
            listener.stop_accepting()
        if self._zeroconf is not None:
            await self._zeroconf.async_unregister_all_services()
            await self._zeroconf.async_close()
        tasks = [task for listener in self.listeners for task in listener.tasks]
        if tasks:
            await asyncio.wait(tasks, timeout=drain_seconds)
        for listener in self.listeners:
            await listener.stop()  # whatever is left
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)

    def _handler(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> AsyncEventHandler:
        refusal = ProviderError(STOPPING) if self.stopping.is_set() else self._full(listener)
        if refusal is not None:
            return _Refusal(reader, writer, refusal)
        key_id = listener.binding.key_id
        return _Counted(self, listener, reader, writer, self._context, key_id, self.stopping)

    def _full(self, listener: Listener) -> ApiError | None:
        """Why the listener may take no connection more now, if it may not."""
        if listener.open >= self._per_listener:
            return ProviderError(
                f"This listener has {listener.open} connections open, its limit "
                "(VOICE_SERVICE_WYOMING_MAX_CONNECTIONS): connect again later."
            )
        kept = sum(
            max(0, self._reserve - other.open) for other in self.listeners if other is not listener
        )
        if self.open + kept >= self._capacity:
            return ProviderError(
                f"This node has {self.open} connections open, its limit "
                "(VOICE_SERVICE_MAX_CONNECTIONS) less those kept for its other listeners: "
                "connect again later, or to another node."
            )
        return None

    def connected(self, listener: Listener, change: int) -> None:
        listener.open += change
        self.open += change
        self._context.metrics.wyoming_connections.inc(change)

    async def _warn_unless_usable(self, binding: WyomingBinding) -> None:
        """An operator's typo shows in the log at start, not only in refused requests."""
        principal = await principal_of_key(self._context.sessions, binding.key_id)
        if principal is None:
            logger.error(
                "Wyoming listener %s: key %s does not exist or is revoked; "
                "its requests are refused.",
                binding.address,
                binding.key_id,
            )

    async def _announce(self) -> None:
        services = [
            service
            for listener in self.listeners
            if (service := announcement(listener.host, listener.port_bound)) is not None
        ]
        if not services:
            logger.warning("zeroconf: no Wyoming listener is on an address others can reach")
            return
        self._zeroconf = AsyncZeroconf(ip_version=IPVersion.V4Only)
        for service in services:
            await self._zeroconf.async_register_service(service)
            logger.info("zeroconf: announced %s", service.name)


def announcement(host: str, port: int) -> AsyncServiceInfo | None:
    """What announces a listener over zeroconf, as Home Assistant's add-ons do; None for
    a loopback listener, which no other machine can reach."""
    address = (
        ipaddress.ip_address(host) if host != "localhost" else ipaddress.ip_address("127.0.0.1")
    )
    if address.is_loopback or address.version != 4:
        return None
    if address.is_unspecified:
        address = ipaddress.ip_address(_outward_address())
    name = f"voice-service-{socket.gethostname()}-{port}"
    return AsyncServiceInfo(
        SERVICE_TYPE,
        f"{name}.{SERVICE_TYPE}",
        addresses=[address.packed],
        port=port,
        server=f"{socket.gethostname()}.local.",
    )


def _outward_address() -> str:
    """The address this machine reaches its network from: a UDP socket 'connected' to the
    mDNS group, which sends nothing."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.setblocking(False)
        probe.connect(("224.0.0.251", 5353))
        address: str = probe.getsockname()[0]
    return address


class _Counted(WyomingHandler):
    def __init__(
        self,
        listeners: WyomingListeners,
        listener: Listener,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        context: AppContext,
        key_id: str,
        stopping: asyncio.Event,
    ) -> None:
        super().__init__(reader, writer, context, key_id, stopping)
        self._listeners = listeners
        self._listener = listener
        listeners.connected(listener, +1)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            self._listeners.connected(self._listener, -1)


class _Refusal(AsyncEventHandler):
    """A connection over the node's cap, or to a stopping node: told so, then closed."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, error: ApiError
    ) -> None:
        super().__init__(reader, writer)
        self._error = error

    async def run(self) -> None:
        try:
            await Connection(self.writer).refuse(self._error)
        finally:
            self.writer.close()

    async def handle_event(self, event: object) -> bool:
        return False
