"""What the console's browser tests share: the screen sizes they use, signing in through the
form, and screenshots to test-artifacts/console/."""

from __future__ import annotations

from typing import Any

from tests.helpers.console import ARTIFACTS, PASSWORD
from tests.helpers.servers import Server

DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1920, "height": 1080}

# Whether a cell's text is on one line: one box per line of the text in it.
ON_ONE_LINE = """cell => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  return range.getClientRects().length === 1;
}"""


def shoot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def signed_in(browser: Any, server: Server, email: str, **options: Any) -> tuple[Any, Any]:
    """A new browser context (`options`: its viewport, script…) and a page signed in as
    `email`; the caller closes the context."""
    context = browser.new_context(**options)
    page = context.new_page()
    sign_in(page, server, email)
    return context, page


def sign_in(page: Any, server: Server, email: str, password: str = PASSWORD) -> None:
    page.goto(f"{server.root}/console/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
