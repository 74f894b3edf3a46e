"""One real `voice-service serve` for the console's tests, its users made with the CLI,
and Debian's Chromium driven by Playwright (launched by path: nothing is downloaded)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.console import ARTIFACTS, CHROMIUM, PASSWORD, Customer, cli, new_customer
from tests.helpers.servers import Server, running_server


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # The webhooks pages' tests have receivers on 127.0.0.1, which the operator allows
    # here, and a delivery that fails is retried once, a second later.
    with running_server(
        tmp_path_factory.mktemp("console-server"),
        outbound_allowed_hosts="127.0.0.1",
        webhook_retry_seconds="1",
    ) as running:
        yield running


@pytest.fixture(scope="package")
def alice(server: Server) -> Customer:
    """The first organization's account (the one `serve` made), with a user."""
    user = cli(
        server,
        "users",
        "create",
        server.account_id,
        "alice@example.com",
        "--password-stdin",
        stdin=PASSWORD + "\n",
    )
    cli(server, "orgs", "create", "Acme Studio", "--account", server.account_id)
    return Customer("alice@example.com", user["id"], server.account_id, server.org_id, "default")


@pytest.fixture(scope="package")
def mallory(server: Server) -> Customer:
    """Another account's user."""
    return new_customer(server, "mallory@example.com", "Mallory Inc")


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield browser
        browser.close()
