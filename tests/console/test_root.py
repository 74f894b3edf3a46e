"""http://HOST:PORT/: a browser lands on the console, an API client gets the JSON 404."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers.api import assert_error
from tests.helpers.servers import Server

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

# What Chromium and Firefox send when they navigate.
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def test_a_browser_is_redirected_to_the_console(server: Server) -> None:
    for accept in (BROWSER_ACCEPT, "TEXT/HTML", "application/json, text/html;q=0.5"):
        response = httpx.get(f"{server.root}/", headers={"Accept": accept}, timeout=60)
        assert response.status_code == 303, accept
        assert response.headers["location"] == "/console/"
        assert response.headers["vary"] == "Accept"


@pytest.mark.parametrize(
    "accept", ["*/*", "application/json", "text/html;q=0", "application/xhtml+xml", None]
)
def test_an_api_client_gets_the_json_not_found(server: Server, accept: str | None) -> None:
    headers = {} if accept is None else {"Accept": accept}
    with httpx.Client(timeout=60) as client:
        if accept is None:
            del client.headers["accept"]  # httpx sends */* unless told not to
        response = client.get(f"{server.root}/", headers=headers)
    error = assert_error(response, 404, "NOT_FOUND")
    assert error["message"] == "No route GET /."
    assert response.headers["vary"] == "Accept"


def test_chromium_opening_the_root_lands_on_the_sign_in_page(browser: Any, server: Server) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.root}/")
    assert page.url == f"{server.root}/console/sign-in"
    expect(page.get_by_role("heading", name="Sign in to the console")).to_be_visible()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    context.close()
