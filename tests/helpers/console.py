"""The console's customers, made with the CLI, and HTTP clients that sign in as them."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.servers import Server

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
PASSWORD = "correct horse battery staple"


def cli(server: Server, *args: str, stdin: str | None = None) -> Any:
    return server.cli(*args, stdin=stdin)


@dataclass(frozen=True)
class Customer:
    """A console user, their account and one organization of it."""

    email: str
    user_id: str
    account_id: str
    org_id: str
    org_name: str


def new_customer(server: Server, email: str, org_name: str) -> Customer:
    org = cli(server, "orgs", "create", org_name)
    user = cli(
        server,
        "users",
        "create",
        org["account_id"],
        email,
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    return Customer(email, user["id"], org["account_id"], org["id"], org_name)


def csrf_token(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match is not None, "no CSRF token in the page"
    return match.group(1)


_addresses = itertools.count(1)


def console_client(server: Server, address: str | None = None) -> httpx.Client:
    """An HTTP client from a client address of its own: the server, like uvicorn behind a
    proxy on the same host, takes X-Forwarded-For from loopback. Sign-ins are limited per
    address; tests that do not test that limit must not share one."""
    if address is None:
        number = next(_addresses)
        address = f"198.18.{number // 250}.{number % 250 + 1}"  # RFC 2544's testing range
    return httpx.Client(base_url=server.root, timeout=60, headers={"X-Forwarded-For": address})


@contextmanager
def signed_in_client(
    server: Server, email: str, password: str = PASSWORD
) -> Iterator[httpx.Client]:
    """An HTTP client with a console session, signed in through the form."""
    with console_client(server) as client:
        page = client.get("/console/sign-in")
        response = client.post(
            "/console/sign-in",
            data={"email": email, "password": password, "csrf_token": csrf_token(page.text)},
        )
        assert response.status_code == 303, response.text
        yield client
