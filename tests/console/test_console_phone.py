"""The console on a phone (390 px wide), in Debian's Chromium: every tab of the navigation is
on screen, the request log, jobs, webhooks and deliveries tables show each row's status,
units and buttons without scrolling sideways, and the usage chart's labels can be read (on
a laptop's and a wide screen too)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.console.browsing import DESKTOP, PHONE, WIDE, shoot, signed_in
from tests.helpers.console import Customer, cli, new_customer
from tests.helpers.console_jobs import (
    deliveries,
    polled,
    receiving,
    settled_job,
    short_recording,
    submit_job,
)
from tests.helpers.servers import Server

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

TABS = (
    "API keys",
    "Usage",
    "Request log",
    "Jobs",
    "Webhooks",
    "Voices",
    "Pronunciation",
    "API reference",
)
# The cells of a table's rows, and the badges, links, buttons and bars in them, that lie
# (wholly or partly) outside the window's width; one hidden (no box) is not on screen at all.
OFF_SCREEN = """table => {
  const wanted = "td, .badge, a, button, progress";
  return Array.from(table.tBodies[0].querySelectorAll(wanted))
    .map(element => [element, element.getBoundingClientRect()])
    .filter(([, box]) => box.width > 0 && (box.left < 0 || box.right > window.innerWidth))
    .map(([element, box]) => `${element.textContent.trim()} at ${box.left}-${box.right} px`);
}"""
# The chart's labels as they are drawn: their font size times the SVG's scale.
LABEL_PIXELS = """svg => Array.from(svg.querySelectorAll("text"),
  text => parseFloat(getComputedStyle(text).fontSize) * svg.getScreenCTM().a)"""
# The smallest label this test calls readable, in CSS pixels.
READABLE = 10


@dataclass(frozen=True)
class Filled:
    """An organization with a row in each table: a failed request, a completed job, a
    webhook told of it and the delivery that told it."""

    customer: Customer
    request_id: str
    job: dict[str, Any]
    hook_id: str
    delivery_id: str

    @property
    def console(self) -> str:
        return f"/console/orgs/{self.customer.org_id}"


@pytest.fixture(scope="module")
def filled(server: Server) -> Filled:
    customer = new_customer(server, "phone@example.com", "Phone Org")
    secret = cli(server, "keys", "create", customer.org_id, "--name", "phone")["secret"]
    headers = {"Authorization": f"Bearer {secret}"}
    failed = httpx.post(
        f"{server.base_url}/text-to-speech",
        headers=headers,
        json={"text": "Hello.", "voice_id": "voice_nobody"},
        timeout=60,
    )
    assert failed.status_code == 404
    with receiving() as receiver:
        hook = httpx.post(
            f"{server.base_url}/webhooks",
            headers=headers,
            json={"url": receiver.url("/hooks/phone"), "events": ["transcription.completed"]},
            timeout=60,
        )
        assert hook.status_code == 201, hook.text
        hook_id = hook.json()["id"]
        job = settled_job(server, secret, submit_job(server, secret, short_recording())["id"])
        assert job["status"] == "completed", job
        (delivery,) = polled(
            lambda: [d for d in deliveries(server, secret, hook_id) if d["attempts"]] or None,
            "the job's completion was never delivered",
        )
    return Filled(customer, failed.headers["x-request-id"], job, hook_id, delivery["id"])


@pytest.fixture(scope="module")
def phone(browser: Any, server: Server, filled: Filled) -> Iterator[Any]:
    """A phone signed in to the organization, for the whole module."""
    context, page = signed_in(
        browser, server, filled.customer.email, viewport=PHONE, is_mobile=True
    )
    yield page
    context.close()


def assert_on_screen(*elements: Any) -> None:
    """Each element lies within the window's width, as the page opened (not scrolled)."""
    for element in elements:
        box = element.bounding_box()
        assert box is not None, element
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (element, box)


def test_every_tab_is_on_a_phones_screen(phone: Any, server: Server, filled: Filled) -> None:
    phone.goto(f"{server.root}{filled.console}/keys")
    navigation = phone.get_by_role("navigation", name="Organization")
    tabs = navigation.get_by_role("link")
    expect(tabs).to_have_text(TABS)
    assert_on_screen(*tabs.all())
    # None of them is hidden past the end of a bar that scrolls.
    assert navigation.evaluate("bar => bar.scrollWidth <= bar.clientWidth")
    shoot(phone, "phone-tabs")


@dataclass(frozen=True)
class Table:
    """A page's table, one of its rows and what that row must show on screen."""

    path: str
    caption: str
    row: str
    status: str
    units: int | None  # the index of the row's units cell
    controls: tuple[tuple[str, str], ...]  # its buttons and links: (role, name's start)


def tables(filled: Filled) -> dict[str, Table]:
    job_id = filled.job["id"]
    return {
        "request log": Table("requests", "Requests", filled.request_id, "404", 7, ()),
        "jobs": Table(
            "jobs",
            "Transcription jobs",
            job_id,
            "completed",
            5,
            (("link", "SRT"), ("link", "JSON")),
        ),
        "webhooks": Table(
            "webhooks",
            "Webhooks",
            "/hooks/phone",
            "Enabled",
            None,
            (("button", "Disable"), ("button", "Delete")),
        ),
        "deliveries": Table(
            f"webhooks/{filled.hook_id}",
            "Deliveries",
            filled.delivery_id,
            "delivered",
            None,
            (("button", "Redeliver"),),
        ),
    }


@pytest.mark.parametrize("name", ["request log", "jobs", "webhooks", "deliveries"])
def test_each_rows_status_units_and_buttons_are_on_a_phones_screen(
    phone: Any, server: Server, filled: Filled, name: str
) -> None:
    shown = tables(filled)[name]
    phone.goto(f"{server.root}{filled.console}/{shown.path}")
    table = phone.get_by_role("table", name=re.compile(f"^{shown.caption}"))
    row = table.get_by_role("row", name=shown.row)  # a part of its name
    status = row.get_by_text(shown.status, exact=True)
    expect(status).to_be_visible()
    controls = [row.get_by_role(role, name=re.compile(f"^{name}")) for role, name in shown.controls]
    units = [] if shown.units is None else [row.get_by_role("cell").nth(shown.units)]
    assert_on_screen(status, *units, *controls)
    assert table.evaluate(OFF_SCREEN) == []  # every row's every cell and control
    assert phone.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
    shoot(phone, f"phone-{name.replace(' ', '-')}-rows")


def test_the_usage_charts_labels_can_be_read_on_every_screen(
    phone: Any, server: Server, filled: Filled
) -> None:
    phone.goto(f"{server.root}{filled.console}/usage")
    chart = phone.get_by_role("img", name="Units per day")
    try:
        for viewport in (PHONE, DESKTOP, WIDE):
            phone.set_viewport_size(viewport)
            expect(chart).to_be_visible()
            sizes = chart.evaluate(LABEL_PIXELS)
            assert len(sizes) >= 5 and min(sizes) >= READABLE, (viewport, sizes)
            box = chart.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
            shoot(phone, f"usage-chart-{viewport['width']}")
    finally:
        phone.set_viewport_size(PHONE)
