"""Where customer-named URLs may lead (kit/outbound.py), checked on addresses and names
without opening a connection: loopback, private and link-local are refused unless the
operator allows the host, and so is plain http."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import pytest

from voice_service.kit.outbound import OutboundPolicy, OutboundRefused, is_public
from voice_service.settings import parse_hosts

pytestmark = pytest.mark.anyio

INTERNAL = [
    "10.0.0.1",
    "10.255.255.254",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",  # the cloud metadata service
    "127.0.0.1",
    "127.1.2.3",
    "100.64.0.1",  # carrier-grade NAT
    "0.0.0.0",  # noqa: S104 (an address checked, not bound)
    "224.0.0.1",
    "::1",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "::ffff:10.0.0.1",  # an internal IPv4 address in IPv6 clothing
    "::ffff:127.0.0.1",
    "::",
    # IPv6 spellings that carry an internal IPv4 address, and ranges reserved or retired
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::7f00:1",
    "64:ff9b:1::808:808",  # a network's own NAT64 prefix
    "::127.0.0.1",  # IPv4-compatible
    "::ffff:0:7f00:1",  # IPv4-translated
    "::ffff:0:a00:1",
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "fec0::1",  # site-local
    "100::1",  # discard-only
    "2001:db8::1",  # documentation
]
PUBLIC = [
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "2606:4700:4700::1111",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",  # NAT64 of a public address
    "2002:808:808::1",  # 6to4 of one
]


@pytest.mark.parametrize("address", INTERNAL)
def test_internal_addresses_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://127.1.2.3:8443/hook",
        "https://localhost/hook",
        "https://[::1]/hook",
        "https://10.1.2.3/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[fd00::5]/hook",
        "https://[::ffff:192.168.0.1]/hook",
        "https://[64:ff9b::a9fe:a9fe]/latest/meta-data",
        "https://[::127.0.0.1]/hook",
        "https://[::ffff:0:7f00:1]/hook",
        "https://[2002:7f00:1::1]/hook",
        "https://[fec0::1]/hook",
    ],
)
async def test_loopback_private_and_link_local_urls_are_refused(url: str) -> None:
    with pytest.raises(OutboundRefused):
        await OutboundPolicy().check(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://93.184.216.34/hook",  # http, to a host nobody allowed
        "ftp://93.184.216.34/hook",
        "https://user:pw@93.184.216.34/hook",
        "https:///hook",
        "https://93.184.216.34:99999/hook",
    ],
)
async def test_other_schemes_credentials_and_bad_ports_are_refused(url: str) -> None:
    with pytest.raises(OutboundRefused):
        await OutboundPolicy().check(url)


async def test_a_public_address_is_connected_to_as_checked() -> None:
    target = await OutboundPolicy().check("https://93.184.216.34:8443/hook?x=1")
    assert (target.url, target.host, target.host_header) == (
        "https://93.184.216.34:8443/hook?x=1",
        "93.184.216.34",
        "93.184.216.34:8443",
    )


async def test_allowed_hosts_may_be_internal_and_plain_http() -> None:
    policy = OutboundPolicy(parse_hosts("localhost, 127.0.0.1:8080, [::1]"))
    target = await policy.check("http://localhost:9000/hook")
    assert target.host == "localhost" and target.host_header == "localhost:9000"
    connected = urlsplit(target.url).hostname
    assert connected is not None and ipaddress.ip_address(connected).is_loopback
    assert (await policy.check("http://127.0.0.1:8080/hook")).url == "http://127.0.0.1:8080/hook"
    with pytest.raises(OutboundRefused):  # allowed on 8080 only
        await policy.check("http://127.0.0.1:8081/hook")
    assert (await policy.check("https://[::1]:1234/x")).url == "https://[::1]:1234/x"


@pytest.mark.parametrize("value", ["host:port", "a/b", "user@host", "h:99999"])
def test_a_bad_allowed_host_is_named(value: str) -> None:
    with pytest.raises(ValueError, match="not host or host:port"):
        parse_hosts(value)


@pytest.mark.parametrize("url", ["http://93.184.216.34/hook", "https://10.1.2.3/hook"])
async def test_a_refusal_names_the_setting_that_would_allow_it(url: str) -> None:
    with pytest.raises(OutboundRefused, match="VOICE_SERVICE_OUTBOUND_ALLOWED_HOSTS"):
        await OutboundPolicy().check(url)
