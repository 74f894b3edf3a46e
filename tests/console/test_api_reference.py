"""The API reference at /api/v1/docs (the console links to it) in Debian's Chromium: it
renders our OpenAPI 3.1 document and "Try it out" calls the API with a customer's key."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers.console import ARTIFACTS
from tests.helpers.servers import Server
from tests.helpers.waiting import eventually

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    # A CSP violation or a failing script shows in the console as an error.
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == [], errors


def test_the_reference_lists_every_operation_and_tries_one_with_a_key(
    page: Any, server: Server
) -> None:
    document = httpx.get(f"{server.base_url}/openapi.json", timeout=60).json()
    assert document["openapi"].startswith("3.1")
    operations = [(method, path) for path, item in document["paths"].items() for method in item]

    answer = page.goto(f"{server.root}/api/v1/docs")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe" not in policy
    expect(page.get_by_role("heading", name=re.compile("^Voice Service"))).to_be_visible()
    expect(page.locator(".opblock")).to_have_count(len(operations))
    for method, path in operations:
        summary = page.locator(f".opblock-{method} .opblock-summary-path[data-path='{path}']")
        expect(summary).to_have_count(1)

    page.get_by_role("button", name="Authorize", exact=True).click()
    page.get_by_role("textbox", name="auth-bearer-value").fill(server.api_key)
    page.get_by_role("button", name="Apply credentials").click()
    page.get_by_role("button", name="Close").click()

    voices = page.locator(".opblock-get").filter(
        has=page.locator(".opblock-summary-path[data-path='/voices']")
    )
    voices.locator(".opblock-summary-control").click()
    voices.get_by_role("button", name="Try it out").click()
    with page.expect_response(re.compile(r"/api/v1/voices$")) as called:
        voices.get_by_role("button", name="Execute").click()
    assert called.value.status == 200
    first_voice = called.value.json()["voices"][0]["id"]
    live = voices.locator(".live-responses-table")
    expect(live.locator("tbody .response-col_status")).to_have_text("200")
    expect(live.locator("tbody .response-col_description")).to_contain_text(first_voice)
    page.screenshot(path=str(ARTIFACTS / "api-reference.png"), full_page=False)

    # The server's own log: the call was the key's, answered 200.
    request_id = called.value.headers["x-request-id"]
    rows = eventually(
        lambda: server.query("SELECT * FROM request_log WHERE request_id = ?", request_id)
    )
    assert [(row["method"], row["path"], row["status"]) for row in rows] == [
        ("GET", "/api/v1/voices", 200)
    ]
    assert rows[0]["key_id"] is not None
