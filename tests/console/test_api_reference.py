"""The API reference at /api/v1/docs (the console links to it) in Debian's Chromium: it
renders our OpenAPI 3.1 documents, "Try it out" calls the API with a customer's key and the
examples it fills in, and it leads to the WebSocket protocols' page and back to the console."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers.console import ARTIFACTS
from tests.helpers.servers import Server
from tests.helpers.voices import JOE
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


def authorize(page: Any, key: str) -> None:
    page.get_by_role("button", name="Authorize", exact=True).click()
    page.get_by_role("textbox", name="auth-bearer-value").fill(key)
    page.get_by_role("button", name="Apply credentials").click()
    page.get_by_role("button", name="Close").click()


def try_it_out(page: Any, method: str, path: str) -> Any:
    """The operation, opened, its form filled in with the document's examples."""
    operation = page.locator(f".opblock-{method}").filter(
        has=page.locator(f".opblock-summary-path[data-path='{path}']")
    )
    operation.locator(".opblock-summary-control").click()
    operation.get_by_role("button", name="Try it out").click()
    return operation


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

    authorize(page, server.api_key)
    voices = try_it_out(page, "get", "/voices")
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


def test_text_to_speech_as_filled_in_speaks(page: Any, server: Server) -> None:
    """The example body names a voice every install has: no `"voice_id": "string"`, 404."""
    page.goto(f"{server.root}/api/v1/docs")
    authorize(page, server.api_key)
    speech = try_it_out(page, "post", "/text-to-speech")
    body = json.loads(speech.locator("textarea.body-param__text").input_value())
    assert body == {"text": "Welcome to Voice Service.", "voice_id": JOE}
    # With a query only while output_format is filled in (see the test below).
    with page.expect_response(re.compile(r"/api/v1/text-to-speech(\?|$)")) as called:
        speech.get_by_role("button", name="Execute").click()
    assert called.value.status == 200
    assert called.value.headers["content-type"] == "audio/mpeg"
    assert int(called.value.headers["content-length"]) > 1000
    live = speech.locator(".live-responses-table")
    expect(live.locator("tbody .response-col_status")).to_have_text("200")
    # It plays the bytes received (Swagger UI alone would GET the URL: 405, without a key).
    expect(live.locator("audio source")).to_have_attribute("src", re.compile("^blob:"))
    player = live.locator("audio")
    player.evaluate("audio => audio.load()")
    page.wait_for_function("audio => audio.duration > 1", arg=player.element_handle())
    live.screenshot(path=str(ARTIFACTS / "api-reference-speech.png"))


def test_try_it_out_fills_in_no_optional_parameter(page: Any, server: Server) -> None:
    """An optional parameter's example is shown, not sent: output_format's would make every
    answer 44.1 kHz MP3 instead of the voice's own rate, the usage period's a fixed month."""
    page.goto(f"{server.root}/api/v1/docs")
    for method, path, names in (
        ("post", "/text-to-speech", ("output_format",)),
        ("get", "/usage", ("from", "to")),
    ):
        operation = try_it_out(page, method, path)
        for name in names:
            field = operation.locator(f"tr[data-param-name='{name}'] input")
            expect(field).to_have_value("")
    page.screenshot(path=str(ARTIFACTS / "api-reference-optional.png"), full_page=False)


def test_error_examples_show_their_own_codes(page: Any, server: Server) -> None:
    page.goto(f"{server.root}/api/v1/docs")
    clone = page.locator(".opblock-post").filter(
        has=page.locator(".opblock-summary-path[data-path='/voices/clone']")
    )
    clone.locator(".opblock-summary-control").click()
    unauthorized = clone.locator(".response[data-code='401']")
    expect(unauthorized.locator(".microlight").first).to_contain_text("INVALID_API_KEY")
    too_large = clone.locator(".response[data-code='413']")
    expect(too_large.locator(".microlight").first).to_contain_text("PAYLOAD_TOO_LARGE")


def test_the_openai_compatible_api_is_in_the_reference(page: Any, server: Server) -> None:
    document = httpx.get(f"{server.root}/v1/openapi.json", timeout=60).json()
    operations = [(method, path) for path, item in document["paths"].items() for method in item]
    page.goto(f"{server.root}/api/v1/docs")
    page.get_by_role("link", name="OpenAI-compatible API").click()
    expect(page.get_by_role("heading", name=re.compile("OpenAI-compatible API"))).to_be_visible()
    expect(page.locator(".opblock")).to_have_count(len(operations))
    speech = page.locator(".opblock-post").filter(
        has=page.locator(".opblock-summary-path[data-path='/audio/speech']")
    )
    speech.locator(".opblock-summary-control").click()
    not_found = speech.locator(".response[data-code='404']")
    expect(not_found.locator(".microlight").first).to_contain_text('"not_found_error"')
    page.screenshot(path=str(ARTIFACTS / "api-reference-openai.png"), full_page=False)


def test_the_websocket_page_is_reachable_from_the_reference(page: Any, server: Server) -> None:
    page.goto(f"{server.root}/api/v1/docs")
    description = page.locator(".swagger-ui .info .description")
    # Swagger UI opens the description's links in a new tab.
    with page.context.expect_page() as opened:
        description.get_by_role("link", name="WebSocket protocols").click()
    protocols = opened.value
    protocols.wait_for_load_state()
    assert protocols.url == f"{server.root}/api/v1/docs/websockets"
    expect(protocols.get_by_role("heading", name="WebSocket protocols", level=1)).to_be_visible()
    for heading in ("Text streamed in", "Live transcription", "Close codes"):
        expect(protocols.get_by_role("heading", name=heading)).to_be_visible()
    for message in ('{"text": ""}', "input_audio_buffer.append", "1012"):
        expect(protocols.get_by_role("cell", name=message).first).to_be_visible()
    # The top bar says where the reader is, and leads back to the documents.
    bar = protocols.get_by_role("navigation", name="API reference")
    current = bar.get_by_role("link", name="WebSocket protocols")
    expect(current).to_have_attribute("aria-current", "page")
    protocols.screenshot(path=str(ARTIFACTS / "api-reference-websockets.png"), full_page=True)
    with protocols.expect_navigation():
        bar.get_by_role("link", name="Native API").click()
    expect(protocols.locator(".opblock").first).to_be_visible()


def test_the_reference_links_back_to_the_console(page: Any, server: Server) -> None:
    page.goto(f"{server.root}/api/v1/docs")
    console = page.get_by_role("link", name="Console")
    expect(console).to_have_attribute("href", "/console/")
    with page.expect_navigation():
        console.click()
    assert page.url.startswith(f"{server.root}/console/")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
