"""The console in a real browser (Debian's Chromium), found by roles and accessible names,
as a customer given only an email and a password uses it. Screenshots of every page go to
test-artifacts/console/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console.browsing import (
    DESKTOP,
    ON_ONE_LINE,
    PHONE,
    WIDE,
    shoot,
    sign_in,
    signed_in,
)
from tests.helpers import speech_clips as clips
from tests.helpers.console import ARTIFACTS, PASSWORD, Customer, cli, new_customer
from tests.helpers.console_jobs import (
    api_get,
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

# Keeps, across the navigation a form starts, what the button looked like once disabled.
RECORD_BUSY = """(button, key) => new MutationObserver(() => {
  if (!button.hasAttribute("disabled")) return;
  const state = {text: button.textContent, busy: button.getAttribute("aria-busy")};
  sessionStorage.setItem(key, JSON.stringify(state));
}).observe(button, {attributes: true})"""


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    context.close()
    assert dialogs == [], f"a script ran: {dialogs}"


def hold(page: Any, url: re.Pattern[str]) -> list[Any]:
    """Requests to `url` wait, held in the list returned, until the test lets each go."""
    held: list[Any] = []
    page.route(url, lambda route: held.append(route))
    return held


def first_held(page: Any, held: list[Any]) -> Any:
    # A route's handler runs while Playwright waits on the page: wait there until it has.
    for _ in range(1000):
        if held:
            return held[0]
        page.wait_for_timeout(10)
    raise AssertionError("the request was never made")


def catalogue_rows(page: Any) -> Any:
    catalogue = page.get_by_role("region", name="Catalogue")
    return catalogue.get_by_role("row").filter(
        has=page.get_by_role("button", name=re.compile("^Play preview of "))
    )


def test_keys_usage_and_request_log(page: Any, server: Server, alice: Customer) -> None:
    sign_in(page, server, alice.email, "not my password at all")
    expect(page.get_by_role("alert")).to_have_text("Incorrect email or password.")
    shoot(page, "sign-in-error")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Organizations")).to_be_visible()
    shoot(page, "organizations")

    page.get_by_role("link", name=alice.org_name, exact=True).click()
    expect(page.get_by_role("heading", name="API keys")).to_be_visible()
    page.get_by_role("button", name="Create key").click()
    page.get_by_label("Name").fill("Browser test")
    page.get_by_role("button", name="Create", exact=True).click()
    secret = page.get_by_label("New API key").inner_text().strip()
    assert re.fullmatch(r"vs_[A-Za-z0-9]{40}", secret)
    expect(page.get_by_role("button", name="Copy")).to_be_visible()
    shoot(page, "keys-new-secret")

    headers = {"Authorization": f"Bearer {secret}"}
    voices = httpx.get(f"{server.base_url}/voices", headers=headers, timeout=60)
    assert voices.status_code == 200
    voice_id = voices.json()["voices"][0]["id"]
    spoken = httpx.post(
        f"{server.base_url}/text-to-speech",
        headers=headers,
        json={"text": "Hello console.", "voice_id": voice_id},
        timeout=120,
    )
    assert spoken.status_code == 200
    request_id = spoken.headers["x-request-id"]

    page.reload()
    expect(page.get_by_label("New API key")).to_have_count(0)
    expect(page.get_by_role("row", name=re.compile("Browser test"))).to_contain_text(secret[:10])
    shoot(page, "keys")

    page.get_by_role("link", name="Request log").click()
    page.get_by_label("Request ID").fill(request_id)
    page.get_by_role("button", name="Filter").click()
    row = page.get_by_role("row", name=re.compile(request_id))
    expect(row).to_contain_text("/api/v1/text-to-speech")
    expect(row).to_contain_text("200")
    expect(row.get_by_role("cell").last).to_have_text(str(len("Hello console.")))
    shoot(page, "request-log")

    # The organization's total, which other tests' requests (the API reference's) add to.
    usage = httpx.get(f"{server.base_url}/usage", headers=headers, timeout=60).json()
    page.get_by_role("link", name="Usage").click()
    totals = page.get_by_role("table", name="Totals")
    expect(totals.get_by_role("row", name=re.compile("text-to-speech"))).to_contain_text(
        str(usage["totals"]["text-to-speech"])
    )
    expect(page.get_by_role("img", name="Units per day")).to_be_visible()
    shoot(page, "usage")

    page.get_by_role("link", name="API keys").click()
    page.get_by_role("row", name=re.compile("Browser test")).get_by_role(
        "button", name="Revoke"
    ).click()
    shoot(page, "revoke-confirm")
    page.get_by_role("button", name="Yes, revoke this key").click()
    expect(page.get_by_role("row", name=re.compile("Browser test"))).to_contain_text("Revoked")
    refused = httpx.get(f"{server.base_url}/voices", headers=headers, timeout=60)
    assert refused.status_code == 401


def test_voices_clone_preview_try_and_delete(
    page: Any, server: Server, alice: Customer, tmp_path: Path
) -> None:
    sample = clips.write_audio(
        tmp_path / "narrator.wav",
        clips.english_speech(" ".join(clips.ENGLISH_TEXTS[:2])),
        "wav-s16",
    )
    sign_in(page, server, alice.email)
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/voices")
    page.get_by_label("Name", exact=True).fill("Narrator")
    page.get_by_label("Description").fill("Audiobook voice")
    page.get_by_label("Audio file").set_input_files(str(sample))
    page.get_by_label(re.compile("I confirm that I have the speaker's permission")).check()
    clone = page.get_by_role("button", name="Clone voice")
    clone.evaluate(RECORD_BUSY, "clone-busy")
    # A process's first clone synthesizes its probes (about 24 CPU-s): on a busy 2-core
    # machine the page comes back after Playwright's default 30 s.
    clone.click(timeout=180_000)
    # Post/redirect/get: the voices page, naming the new voice, which a reload only shows.
    voices_url = re.compile(rf"/console/orgs/{alice.org_id}/voices\?cloned=voice_\w+$")
    expect(page).to_have_url(voices_url)
    banner = page.get_by_role("status").filter(has_text="cloned")
    expect(banner).to_have_text("Voice “Narrator” cloned.")
    narrator = page.get_by_role("row", name=re.compile("Narrator"))
    expect(narrator).to_have_class("highlight")
    busy = page.evaluate("key => JSON.parse(sessionStorage.getItem(key))", "clone-busy")
    assert busy == {"text": "Cloning…", "busy": "true"}  # once disabled, while it worked
    shoot(page, "voices")
    page.reload()
    expect(page).to_have_url(voices_url)
    expect(narrator).to_have_count(1)

    held = hold(page, re.compile(r"/preview$"))
    play = page.get_by_role("button", name="Play preview of Narrator")
    play.click()
    expect(play).to_be_disabled()
    expect(play).to_have_text("Loading…")
    with page.expect_response(re.compile(r"/preview$")) as preview:
        first_held(page, held).continue_()
    assert preview.value.status == 200
    assert preview.value.headers["content-type"] == "audio/mpeg"
    expect(play).to_be_enabled()

    page.get_by_label("Voice", exact=True).select_option(label="Narrator")
    page.get_by_label("Text", exact=True).fill("Trying it out.")
    page.get_by_label("Speed", exact=True).fill("1.25")
    with page.expect_response(re.compile(r"/text-to-speech$")) as spoken:
        page.get_by_role("button", name="Speak", exact=True).click()
    assert spoken.value.status == 200
    expect(page.get_by_label("Speech")).to_have_attribute("src", re.compile("^blob:"))

    page.get_by_role("row", name=re.compile("Narrator")).get_by_role(
        "button", name="Delete"
    ).click()
    page.get_by_role("button", name="Yes, delete this voice").click()
    expect(page.get_by_role("table").first).not_to_contain_text("Narrator")


def test_a_voice_named_like_a_script_shows_as_text(
    page: Any, server: Server, alice: Customer, tmp_path: Path
) -> None:
    sample = clips.write_audio(tmp_path / "s.wav", clips.english_speech(), "wav-s16")
    name = "<script>alert(1)</script>"
    created = httpx.post(
        f"{server.base_url}/voices/clone",
        headers={"Authorization": f"Bearer {server.api_key}"},
        data={"name": name, "consent": "true"},
        files={"file": ("s.wav", sample.read_bytes(), "audio/wav")},
        timeout=120,
    )
    assert created.status_code == 201, created.text
    sign_in(page, server, alice.email)
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/voices")
    # Shown as text (and the page fixture checks that no dialog opened).
    expect(page.get_by_role("row", name=name).get_by_text(name, exact=True)).to_be_visible()


def test_jobs_and_webhooks(page: Any, server: Server, alice: Customer) -> None:
    """A webhook made on its page is told of a job the API ran; the job's SRT downloads
    from the Jobs page, and the webhook's page sends its delivery again."""
    with receiving() as receiver:
        sign_in(page, server, alice.email)
        page.get_by_role("link", name=alice.org_name, exact=True).click()
        page.get_by_role("link", name="Webhooks", exact=True).click()
        expect(page.get_by_role("heading", name="Webhooks")).to_be_visible()
        page.get_by_role("button", name="Create webhook").click()
        url = receiver.url("/hooks/browser")
        page.get_by_label("URL", exact=True).fill(url)
        page.get_by_label("Description").fill("Browser test")
        page.get_by_role("button", name="Create", exact=True).click()
        secret = page.get_by_label("New signing secret").inner_text().strip()
        assert re.fullmatch(r"whsec_[A-Za-z0-9+/]+=*", secret)
        expect(page.get_by_role("button", name="Copy")).to_be_visible()
        shoot(page, "webhooks-new-secret")
        page.reload()
        expect(page.get_by_label("New signing secret")).to_have_count(0)
        expect(page.get_by_role("row", name=url)).to_contain_text("Enabled")
        shoot(page, "webhooks")

        job = submit_job(server, server.api_key, short_recording())
        done = settled_job(server, server.api_key, job["id"])
        assert done["status"] == "completed", done
        page.get_by_role("link", name="Jobs", exact=True).click()
        row = page.get_by_role("row", name=re.compile(job["id"]))
        expect(row.get_by_role("cell").nth(2)).to_have_text("completed")
        expect(row.get_by_role("progressbar", name="Transcribed")).to_have_attribute("value", "100")
        expect(row.get_by_role("cell").nth(5)).to_have_text(str(done["units"]))
        table = page.get_by_role("table", name="Transcription jobs")
        # Every column on a laptop's screen (a phone's: test_console_phone.py).
        assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
        shoot(page, "jobs")
        with page.expect_download() as download:
            row.get_by_role("link", name=re.compile("^SRT")).click()
        assert download.value.suggested_filename == f"{job['id']}.srt"
        srt = api_get(server, server.api_key, f"/transcription-jobs/{job['id']}", format="srt")
        assert Path(download.value.path()).read_text() == srt.text

        page.get_by_role("link", name="Webhooks", exact=True).click()
        page.get_by_role("link", name=url).click()
        hook_id = page.url.rsplit("/", 1)[-1]
        (delivery,) = polled(
            lambda: (
                [d for d in deliveries(server, server.api_key, hook_id) if d["attempts"]] or None
            ),
            "the job's completion was never delivered",
        )
        page.reload()
        row = page.get_by_role("row", name=re.compile(delivery["id"]))
        expect(row).to_contain_text("delivered")
        shoot(page, "webhook")
        row.get_by_role("button", name=re.compile("^Redeliver")).click()
        notice = page.get_by_role("status")
        expect(notice).to_have_text(f"Delivery {delivery['id']} queued to be sent again.")
        polled(
            lambda: receiver.answers_to(delivery["id"]) == [200, 200] or None,
            "the receiver never got the delivery again",
        )
        polled(
            lambda: len(deliveries(server, server.api_key, hook_id)[0]["attempts"]) == 2 or None,
            "the second attempt was never recorded",
        )
        page.reload()
        expect(row.get_by_role("listitem")).to_have_count(2)
        shoot(page, "webhook-redelivered")

        table = page.get_by_role("table", name=re.compile("^Deliveries"))
        assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
        expect(row.get_by_role("button", name=re.compile("^Redeliver"))).to_be_in_viewport(ratio=1)
        page.set_viewport_size(PHONE)  # each delivery a block of labelled lines
        assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
        assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
        shoot(page, "phone-webhook")
        page.set_viewport_size(DESKTOP)

        page.get_by_role("button", name="Delete").click()
        shoot(page, "webhook-delete-confirm")
        page.get_by_role("button", name="Yes, delete this webhook").click()
        expect(page.get_by_role("heading", name="Webhooks")).to_be_visible()
        expect(page.get_by_role("row", name=url)).to_have_count(0)


def test_phone_layout_and_other_accounts(
    browser: Any, server: Server, alice: Customer, mallory: Customer
) -> None:
    context, page = signed_in(browser, server, alice.email, viewport=PHONE, is_mobile=True)
    for name in ("keys", "voices", "usage", "jobs", "webhooks"):
        page.goto(f"{server.root}/console/orgs/{alice.org_id}/{name}")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{name} is {width} px wide on a phone"
        shoot(page, f"phone-{name}")
    response = page.goto(f"{server.root}/console/orgs/{mallory.org_id}/keys")
    assert response.status == 404
    context.close()


def test_the_new_key_forms_fields_line_up(page: Any, server: Server, alice: Customer) -> None:
    """Name, Rate limit and Monthly cap side by side on a laptop, at one height, though only
    the last two have help under them."""
    sign_in(page, server, alice.email)
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/keys")
    page.get_by_role("button", name="Create key").click()
    fields = [page.get_by_label(name, exact=True) for name in ("Name", "Rate limit", "Monthly cap")]
    assert len({field.bounding_box()["y"] for field in fields}) == 1
    assert len({field.bounding_box()["height"] for field in fields}) == 1


def test_the_keys_table_fits_a_phone_with_its_actions_on_screen(
    browser: Any, server: Server, alice: Customer
) -> None:
    context, page = signed_in(browser, server, alice.email, viewport=PHONE, is_mobile=True)
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/keys")
    page.get_by_role("button", name="Create key").click()
    name = "Phone key for the staging server, with a name longer than a phone is wide"
    page.get_by_label("Name").fill(name)
    page.get_by_role("button", name="Create", exact=True).click()
    expect(page.get_by_label("New API key")).to_be_visible()
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/keys")

    assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
    table = page.get_by_role("table")
    assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
    row = table.get_by_role("row", name=re.compile("Phone key for the staging server"))
    revoke = row.get_by_role("button", name="Revoke")
    # On screen as the page opens: neither the page nor the table scrolled sideways.
    for cell in (*row.get_by_role("cell").all(), revoke):
        box = cell.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    expect(row).to_contain_text("Active")
    shoot(page, "phone-keys-table")
    revoke.click()
    page.get_by_role("button", name="Yes, revoke this key").click()
    expect(
        table.get_by_role("row", name=re.compile("Phone key for the staging server"))
    ).to_contain_text("Revoked")
    context.close()


# On a phone, where each row is a block of labelled lines: test_console_phone.py.
@pytest.mark.parametrize("viewport", [DESKTOP, WIDE], ids=lambda v: f"{v['width']}px")
def test_every_request_log_column_can_be_seen(
    browser: Any, server: Server, alice: Customer, viewport: dict[str, int]
) -> None:
    failed = httpx.post(
        f"{server.base_url}/text-to-speech",
        headers={"Authorization": f"Bearer {server.api_key}"},
        json={"text": "Hello.", "voice_id": "voice_nobody"},
        timeout=60,
    )
    assert failed.status_code == 404
    context, page = signed_in(browser, server, alice.email, viewport=viewport)
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/requests")

    row = page.get_by_role("row", name=re.compile(failed.headers["x-request-id"]))
    expect(row).to_contain_text("NOT_FOUND")
    assert row.get_by_role("cell").first.evaluate(ON_ONE_LINE), "the time wraps"
    expect(page.get_by_role("columnheader").last).to_have_text("Units")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= viewport["width"]
    table = page.get_by_role("table", name="Requests")
    assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
    for name in ("Error", "Duration", "Units"):
        header = page.get_by_role("columnheader", name=name, exact=True)
        expect(header).to_be_visible()
        expect(header).to_be_in_viewport(ratio=1)
    shoot(page, f"request-log-{viewport['width']}")
    context.close()


def test_the_catalogue_is_searched_by_name_and_language_without_script(
    browser: Any, server: Server, alice: Customer
) -> None:
    context, page = signed_in(
        browser, server, alice.email, viewport=DESKTOP, java_script_enabled=False
    )
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/voices")
    rows = catalogue_rows(page)
    everything = rows.count()

    page.get_by_label("Search by name").fill("kumo")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page).to_have_url(re.compile(r"\?q=kumo&language=#catalogue$"))
    kumo = rows.all_inner_texts()
    assert 1 < len(kumo) < everything
    assert all("Kumo" in row for row in kumo)

    page.get_by_label("Language").select_option("es")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("Kokoro Kumo (Spanish)")
    catalogue = page.get_by_role("region", name="Catalogue")
    catalogue.screenshot(path=str(ARTIFACTS / "voices-search.png"))  # the page is scrolled to it

    page.get_by_role("link", name="Show all").click()
    expect(rows).to_have_count(everything)
    context.close()


def test_without_script_a_preview_opens_its_audio(
    browser: Any, server: Server, alice: Customer
) -> None:
    context, page = signed_in(
        browser, server, alice.email, viewport=DESKTOP, java_script_enabled=False
    )
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/voices")
    preview = catalogue_rows(page).first.get_by_role("button", name=re.compile("^Play preview"))
    with page.expect_response(re.compile(r"/preview\?$")) as audio:
        preview.click()
    assert audio.value.status == 200
    assert audio.value.headers["content-type"] == "audio/mpeg"
    context.close()


def test_a_preview_is_busy_until_its_audio_comes(
    page: Any, server: Server, alice: Customer
) -> None:
    sign_in(page, server, alice.email)
    page.goto(f"{server.root}/console/orgs/{alice.org_id}/voices")
    held = hold(page, re.compile(r"/preview$"))
    preview = catalogue_rows(page).first.get_by_role("button", name=re.compile("^Play preview"))
    preview.click()
    expect(preview).to_be_disabled()
    expect(preview).to_have_attribute("aria-busy", "true")
    expect(preview).to_have_text("Loading…")
    expect(page.get_by_role("status").filter(has_text="Loading the preview")).to_be_visible()
    with page.expect_response(re.compile(r"/preview$")) as answer:
        first_held(page, held).continue_()
    assert answer.value.status == 200
    expect(preview).to_be_enabled()
    expect(preview).not_to_have_attribute("aria-busy", "true")
    expect(preview).to_have_text("▶ Preview")


@pytest.mark.parametrize("viewport", [DESKTOP, WIDE], ids=lambda v: f"{v['width']}px")
def test_the_keys_table_fits_a_laptop_with_its_dates_on_one_line(
    browser: Any, server: Server, viewport: dict[str, int]
) -> None:
    owner = new_customer(server, f"keys-{viewport['width']}@example.com", "Wide Keys Org")
    scopes = "text-to-speech,speech-to-text,asr,voices:read,voices:write"
    # The widest cells a column gets: every scope but one, a cap, a revoked key's badge.
    cli(server, "keys", "create", owner.org_id, "--scopes", scopes, "--monthly-units", "2000000")
    old = cli(server, "keys", "create", owner.org_id, "--name", "Old laptop")
    cli(server, "keys", "revoke", old["id"])
    context, page = signed_in(browser, server, owner.email, viewport=viewport)
    page.goto(f"{server.root}/console/orgs/{owner.org_id}/keys")

    table = page.get_by_role("table")
    assert table.evaluate("t => t.parentElement.scrollWidth <= t.parentElement.clientWidth")
    expect(table.get_by_role("row", name=re.compile("Old laptop"))).to_contain_text("Revoked")
    for row in table.get_by_role("row").filter(has=page.get_by_role("cell")).all():
        assert row.get_by_role("cell").nth(2).evaluate(ON_ONE_LINE), "the date wraps"
    expect(table.get_by_role("button", name="Revoke")).to_be_in_viewport(ratio=1)
    context.close()
