"""Where the service may send requests a customer names (webhook deliveries, audio fetched
by URL with `fetch_to_file`): public addresses only, checked after DNS resolution and then
connected to as checked, so a name that resolves to an internal address (or changes its
answer between the check and the connection) reaches nothing inside the operator's network.

The operator may allow hosts anyway (`VOICE_SERVICE_OUTBOUND_ALLOWED_HOSTS`: `host` or
`host:port`, comma-separated), for internal stores and receivers, and for tests.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import urljoin, urlsplit

import httpx

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(Exception):
    """The URL may not be reached: its scheme, or an address it resolves to."""


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL: where to connect, and the name to present (Host, TLS SNI)."""

    url: str  # with the checked address in place of the host name
    host: str  # the name as the URL gave it (for Host and SNI)
    host_header: str  # host[:port] as the URL gave them


@dataclass(frozen=True, slots=True)
class OutboundPolicy:
    # (host, port or None for any port): `Settings.outbound_allowed`
    allowed: frozenset[tuple[str, int | None]] = frozenset()

    def allows(self, host: str, port: int) -> bool:
        host = host.lower()
        return (host, None) in self.allowed or (host, port) in self.allowed

    async def check(self, url: str) -> Target:
        """`url` resolved and checked; raises OutboundRefused."""
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise OutboundRefused("the URL must be https://host/...")
        if parts.username or parts.password:
            raise OutboundRefused("the URL may not carry credentials")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise OutboundRefused("the URL's port is not a number from 0 to 65535") from None
        host = parts.hostname
        allowed = self.allows(host, port)
        if parts.scheme == "http" and not allowed:
            raise OutboundRefused(
                "the URL must be https (http only to hosts the operator allows in "
                "VOICE_SERVICE_OUTBOUND_ALLOWED_HOSTS)"
            )
        address = await _resolve(host, port)
        if not allowed and not is_public(address):
            raise OutboundRefused(
                f"{host} is a private, loopback or link-local address (or resolves to one); "
                "the operator may allow it in VOICE_SERVICE_OUTBOUND_ALLOWED_HOSTS"
            )
        shown = f"[{address}]" if address.version == 6 else str(address)
        netloc = f"{shown}:{port}"
        target = parts._replace(netloc=netloc).geturl()
        header = parts.netloc.rsplit("@", 1)[-1]
        return Target(target, host, header)


def is_public(address: IpAddress) -> bool:
    """An address on the public internet: not private (10/8, 172.16/12, 192.168/16,
    fc00::/7), loopback, link-local (169.254/16, fe80::/10), shared (100.64/10), multicast,
    reserved, site-local (fec0::/10) or unspecified. An IPv6 address that carries an IPv4
    one (mapped, translated, compatible, NAT64, 6to4) is judged as the IPv4 address it
    reaches."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return is_public(embedded)
        if address.is_reserved or address.is_site_local or address in _NAT64_LOCAL:
            return False
    return address.is_global and not address.is_multicast


# IPv6 ranges whose last 32 bits are an IPv4 address the packet goes on to.
_CARRY_IPV4 = (
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (RFC 2765)
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible (deprecated), :: and ::1 among them
    ipaddress.IPv6Network("64:ff9b::/96"),  # NAT64's well-known prefix (RFC 6052)
)
# NAT64 prefixes of a network's own (RFC 8215): where they lead is the network's business.
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in network for network in _CARRY_IPV4):
        return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return None


async def _resolve(host: str, port: int) -> IpAddress:
    """The address to connect to: every address the name has must pass (a name with one
    internal address among public ones is refused), so the first is taken."""
    try:
        literal: IpAddress = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return literal
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise OutboundRefused(f"{host} does not resolve") from None
    addresses = [ipaddress.ip_address(info[4][0]) for info in found]
    if not addresses:
        raise OutboundRefused(f"{host} does not resolve")
    internal = [address for address in addresses if not is_public(address)]
    return internal[0] if internal else addresses[0]


class FetchFailed(Exception):
    """The URL did not give a file: its answer, or too much of one."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


MAX_REDIRECTS = 5


async def fetch_to_file(
    policy: OutboundPolicy,
    client: httpx.AsyncClient,
    url: str,
    target: BinaryIO,
    max_bytes: int,
) -> int:
    """GET `url` into `target`, at most `max_bytes`, following redirects only to the same
    host (each hop checked again); the bytes written. Raises OutboundRefused or
    FetchFailed. The caller bounds the time."""
    for _ in range(MAX_REDIRECTS + 1):
        checked = await policy.check(url)
        request = client.build_request(
            "GET",
            checked.url,
            headers={"Host": checked.host_header},
            extensions={"sni_hostname": checked.host},
        )
        response = await client.send(request, stream=True)
        try:
            if response.is_redirect:
                location = urljoin(url, response.headers.get("location", ""))
                if urlsplit(location).hostname != urlsplit(url).hostname:
                    raise OutboundRefused("the URL redirects to another host")
                url = location
                continue
            if response.status_code != 200:
                raise FetchFailed(f"the URL answered {response.status_code}")
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                raise FetchFailed("the file is larger than the limit", too_large=True)
            size = 0
            async for chunk in response.aiter_bytes(1024 * 1024):
                size += len(chunk)
                if size > max_bytes:
                    raise FetchFailed("the file is larger than the limit", too_large=True)
                await asyncio.to_thread(target.write, chunk)
            return size
        finally:
            await response.aclose()
    raise OutboundRefused(f"the URL redirects more than {MAX_REDIRECTS} times")
