"""How an operator names Wyoming listeners, and what zeroconf would announce (built, never
sent: the suite sends nothing past loopback)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.helpers.cli import unconfigured_env, voice_service
from voice_service.settings import WyomingBinding, parse_wyoming
from voice_service.wyoming.listeners import SERVICE_TYPE, announcement

KEY = "key_0123456789abcdef01234567"


def test_listeners_from_the_setting() -> None:
    assert parse_wyoming(f"10300={KEY}, 0.0.0.0:10301={KEY},[::1]:10302={KEY}") == (
        WyomingBinding("127.0.0.1", 10300, KEY),
        WyomingBinding("0.0.0.0", 10301, KEY),  # noqa: S104
        WyomingBinding("::1", 10302, KEY),
    )
    assert parse_wyoming("") == ()


@pytest.mark.parametrize(
    "value",
    [
        "10300",
        f"x={KEY}",
        "10300=key_1",
        f"70000={KEY}",
        f"a:b={KEY}",
        f"1={KEY},127.0.0.1:1={KEY}",
    ],
)
def test_a_listener_that_is_not_one(value: str) -> None:
    with pytest.raises(ValueError, match=r"KEY_ID|two listeners"):
        parse_wyoming(value)


def test_serve_names_a_bad_listener_before_it_starts(tmp_path: Path) -> None:
    done = voice_service("serve", "--wyoming", "10300=nokey", cwd=tmp_path, env=unconfigured_env())
    assert done.returncode == 2
    assert "VOICE_SERVICE_WYOMING" in done.stderr and "10300=nokey" in done.stderr
    assert "Traceback" not in done.stderr


def test_zeroconf_announces_a_reachable_listener() -> None:
    service = announcement("192.0.2.10", 10300)  # TEST-NET-1: built, never sent to
    assert service is not None
    assert service.type == SERVICE_TYPE == "_wyoming._tcp.local."
    assert service.port == 10300
    assert service.addresses == [socket.inet_aton("192.0.2.10")]
    assert service.name.endswith("." + SERVICE_TYPE)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_zeroconf_leaves_a_loopback_listener_out(host: str) -> None:
    assert announcement(host, 10300) is None
