"""The Jobs and Webhooks pages over HTTP, against the console's real server: a job submitted
through the API is listed with its progress and units and its transcript downloads as the
API gives it; webhooks are made with the form (the secret shown once, loopback URLs refused
unless the operator allows the host), switched off and on, deleted; a delivery that failed
shows its attempts, and Redeliver sends it again. Another account sees none of it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.helpers.console import Customer, csrf_token, new_customer, signed_in_client
from tests.helpers.console_jobs import (
    Receiver,
    api_get,
    deliveries,
    polled,
    receiving,
    settled_job,
    short_recording,
    submit_job,
)
from tests.helpers.servers import Server

FAILING = "/hooks/failing"  # the receiver answers 500 here until a test says otherwise
FORMATS = (("txt", "text"), ("srt", "srt"), ("vtt", "vtt"))


@dataclass(frozen=True)
class Owner:
    customer: Customer
    secret: str  # an API key of the organization, made on its keys page

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}

    @property
    def console(self) -> str:
        return f"/console/orgs/{self.customer.org_id}"


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving() as receiving_now:
        yield receiving_now


@pytest.fixture(scope="module")
def owner(server: Server) -> Owner:
    customer = new_customer(server, "jobs-owner@example.com", "Jobs Org")
    with signed_in_client(server, customer.email) as client:
        keys = f"/console/orgs/{customer.org_id}/keys"
        form = {"name": "jobs", "csrf_token": csrf_token(client.get(keys).text)}
        made = client.post(keys, data=form)
    secret = re.search(r'aria-label="New API key">(vs_\w+)<', made.text)
    assert secret is not None, made.text
    return Owner(customer, secret.group(1))


@pytest.fixture(scope="module")
def console(server: Server, owner: Owner) -> Iterator[httpx.Client]:
    """The owner signed in to the console, for the whole module."""
    with signed_in_client(server, owner.customer.email) as client:
        yield client


@pytest.fixture(scope="module")
def failing_hook(server: Server, owner: Owner, receiver: Receiver) -> dict[str, Any]:
    """A webhook told of completed jobs, whose receiver answers 500 (the server's settings
    retry once, a second later: then the delivery has failed)."""
    receiver.failing.add(FAILING)
    made = httpx.post(
        f"{server.base_url}/webhooks",
        headers=owner.headers,
        json={"url": receiver.url(FAILING), "events": ["transcription.completed"]},
        timeout=60,
    )
    assert made.status_code == 201, made.text
    hook: dict[str, Any] = made.json()
    return hook


@pytest.fixture(scope="module", autouse=True)
def submitted(server: Server, owner: Owner, failing_hook: dict[str, Any]) -> dict[str, Any]:
    """A short job, submitted as the module starts: it is transcribed while the tests that
    need no finished job run."""
    return submit_job(server, owner.secret, short_recording(3.0))


@pytest.fixture(scope="module")
def job(server: Server, owner: Owner, submitted: dict[str, Any]) -> dict[str, Any]:
    """The job, completed, as the API shows it."""
    done = settled_job(server, owner.secret, submitted["id"])
    assert done["status"] == "completed", done
    return done


def row(html: str, text: str) -> str:
    """The one table row of the page that contains `text`."""
    rows = [found for found in re.findall(r"<tr>.*?</tr>", html, re.DOTALL) if text in found]
    assert len(rows) == 1, f"{len(rows)} rows with {text!r}"
    return rows[0]


def audited(server: Server, owner: Owner, target: str) -> list[str]:
    """The account's audit actions on `target`, newest first, as an operator reads them."""
    rows = server.query(
        "SELECT action FROM audit_log WHERE account_id = ? AND target LIKE ? "
        "ORDER BY created_at DESC, rowid DESC",
        owner.customer.account_id,
        f"%{target}%",
    )
    return [found["action"] for found in rows]


def webhook_urls(server: Server, owner: Owner) -> list[str]:
    listed = api_get(server, owner.secret, "/webhooks").json()["webhooks"]
    return [hook["url"] for hook in listed]


def test_a_webhook_made_with_the_form_shows_its_secret_once(
    console: httpx.Client, server: Server, owner: Owner, receiver: Receiver
) -> None:
    url = f"{owner.console}/webhooks"
    form = {
        "url": receiver.url("/hooks/form"),
        "events": ["transcription.failed"],
        "description": "Made in the console",
        "csrf_token": csrf_token(console.get(url).text),
    }
    made = console.post(url, data=form)
    assert made.status_code == 200, made.text
    (secret,) = re.findall(r"whsec_[A-Za-z0-9+/=]+", made.text)
    (hook,) = [
        hook
        for hook in api_get(server, owner.secret, "/webhooks").json()["webhooks"]
        if hook["url"] == receiver.url("/hooks/form")
    ]
    assert hook["events"] == ["transcription.failed"]
    assert hook["description"] == "Made in the console" and hook["enabled"] is True
    assert "secret" not in hook

    again = console.get(url)
    assert "whsec_" not in again.text and secret not in again.text
    listed = row(again.text, hook["id"])
    assert receiver.url("/hooks/form") in listed.replace("<wbr>", "")
    assert "transcription.failed" in listed and ">Enabled<" in listed
    assert audited(server, owner, hook["id"]) == ["webhook_created"]


def test_a_url_inside_the_network_is_refused_unless_the_operator_allows_its_host(
    console: httpx.Client, server: Server, owner: Owner, receiver: Receiver
) -> None:
    """The server allows 127.0.0.1 (OUTBOUND_ALLOWED_HOSTS), and only it."""
    url = f"{owner.console}/webhooks"
    token = csrf_token(console.get(url).text)
    before = webhook_urls(server, owner)
    for refused, message in (
        ("https://127.0.0.2/hook", "127.0.0.2 is a private, loopback or link-local address"),
        ("https://[::1]/hook", "::1 is a private, loopback or link-local address"),
        ("http://localhost:9/hook", "http only to hosts the operator allows"),
        ("https://10.0.0.8/hook", "10.0.0.8 is a private, loopback or link-local address"),
    ):
        form = {"url": refused, "events": ["transcription.failed"], "csrf_token": token}
        answer = console.post(url, data=form)
        assert answer.status_code == 400, refused
        alert = re.search(r'<div class="alert alert-error" role="alert">(.*?)</div>', answer.text)
        assert alert is not None and message in alert.group(1), refused
        assert f'value="{refused}"' in answer.text  # the form keeps what was typed
        assert "whsec_" not in answer.text
    no_events = {"url": receiver.url("/hooks/none"), "csrf_token": token}
    answer = console.post(url, data=no_events)
    assert answer.status_code == 400 and "at least one of the events" in answer.text
    assert webhook_urls(server, owner) == before

    allowed = {"url": receiver.url("/hooks/allowed"), "events": ["transcription.failed"]}
    made = console.post(url, data={**allowed, "csrf_token": token})
    assert made.status_code == 200 and "whsec_" in made.text
    assert webhook_urls(server, owner) == [*before, receiver.url("/hooks/allowed")]


def test_a_webhook_is_disabled_enabled_and_deleted_after_a_confirmation(
    console: httpx.Client, server: Server, owner: Owner, receiver: Receiver
) -> None:
    made = httpx.post(
        f"{server.base_url}/webhooks",
        headers=owner.headers,
        json={"url": receiver.url("/hooks/switched"), "events": ["transcription.failed"]},
        timeout=60,
    )
    hook_id = made.json()["id"]
    page = f"{owner.console}/webhooks/{hook_id}"
    token = csrf_token(console.get(f"{owner.console}/webhooks").text)

    off = console.post(f"{page}/disable", data={"csrf_token": token})
    assert off.status_code == 303 and off.headers["location"] == f"{owner.console}/webhooks"
    assert api_get(server, owner.secret, f"/webhooks/{hook_id}").json()["enabled"] is False
    listed = row(console.get(f"{owner.console}/webhooks").text, hook_id)
    assert ">Disabled<" in listed and ">Enable<" in listed

    on = console.post(f"{page}/enable", data={"csrf_token": token, "from": "webhook"})
    assert on.status_code == 303 and on.headers["location"] == page
    assert api_get(server, owner.secret, f"/webhooks/{hook_id}").json()["enabled"] is True

    confirm = console.get(f"{page}/delete")
    assert confirm.status_code == 200 and "Yes, delete this webhook" in confirm.text
    assert console.post(f"{page}/delete").status_code == 403  # without the form's token
    gone = console.post(f"{page}/delete", data={"csrf_token": token})
    assert gone.status_code == 303 and gone.headers["location"] == f"{owner.console}/webhooks"
    assert api_get(server, owner.secret, f"/webhooks/{hook_id}").status_code == 404
    assert console.get(page).status_code == 404
    assert audited(server, owner, hook_id) == [
        "webhook_deleted",
        "webhook_enabled",
        "webhook_disabled",
    ]


def test_cancel_stops_a_job_under_way(console: httpx.Client, server: Server, owner: Owner) -> None:
    # Cancelled within moments of its submission, the job (behind the module's first, on
    # the server's one job worker) has not had the time to end.
    queued = submit_job(server, owner.secret, short_recording(1.0))
    page = console.get(f"{owner.console}/jobs")
    assert ">Cancel<" in row(page.text, queued["id"])
    cancelled = console.post(
        f"{owner.console}/jobs/{queued['id']}/cancel", data={"csrf_token": csrf_token(page.text)}
    )
    assert cancelled.status_code == 303
    job = api_get(server, owner.secret, f"/transcription-jobs/{queued['id']}").json()
    assert (job["status"], job["units"]) == ("cancelled", None)
    shown = row(console.get(f"{owner.console}/jobs").text, queued["id"])
    assert ">cancelled<" in shown and ">Cancel<" not in shown and "transcript." not in shown
    assert audited(server, owner, queued["id"]) == ["job_cancelled"]


def test_an_unknown_page_of_jobs_shows_the_newest(console: httpx.Client, owner: Owner) -> None:
    page = console.get(f"{owner.console}/jobs", params={"before": "job_gone"})
    assert page.status_code == 200
    assert "That page no longer exists; showing the newest jobs." in page.text
    assert f'href="{owner.console}/jobs">Newest</a>' in page.text


def test_the_jobs_page_lists_a_completed_job_with_its_progress_and_units(
    console: httpx.Client, owner: Owner, job: dict[str, Any]
) -> None:
    page = console.get(f"{owner.console}/jobs")
    assert page.status_code == 200
    assert 'aria-current="page">Jobs</a>' in page.text
    shown = row(page.text, job["id"])
    assert '<span class="badge badge-ok">completed</span>' in shown
    assert job["duration_seconds"] == 3.0
    assert "0:03 of 0:03" in shown and 'value="100"' in shown
    assert isinstance(job["units"], int) and job["units"] > 0
    assert f'title="{job["units"]} units billed under speech-to-text" data-label="Units">' in shown
    assert f">{job['units']}</td>" in shown
    for extension in ("txt", "srt", "vtt", "json"):
        assert f'href="{owner.console}/jobs/{job["id"]}/transcript.{extension}"' in shown


def test_each_download_is_the_apis_transcript_as_an_attachment(
    console: httpx.Client, server: Server, owner: Owner, job: dict[str, Any]
) -> None:
    base = f"{owner.console}/jobs/{job['id']}/transcript"
    for extension, api_format in FORMATS:
        got = console.get(f"{base}.{extension}")
        api = api_get(server, owner.secret, f"/transcription-jobs/{job['id']}", format=api_format)
        assert got.status_code == api.status_code == 200, extension
        assert got.text == api.text and got.text.strip(), extension
        assert got.headers["content-type"] == api.headers["content-type"], extension
        disposition = f'attachment; filename="{job["id"]}.{extension}"'
        assert got.headers["content-disposition"] == disposition
    as_json = console.get(f"{base}.json")
    assert as_json.headers["content-disposition"] == f'attachment; filename="{job["id"]}.json"'
    assert (
        as_json.json() == api_get(server, owner.secret, f"/transcription-jobs/{job['id']}").json()
    )
    assert console.get(f"{base}.pdf").status_code == 404


def test_another_accounts_user_gets_404_for_the_job_and_the_webhook(
    server: Server,
    owner: Owner,
    mallory: Customer,
    job: dict[str, Any],
    failing_hook: dict[str, Any],
) -> None:
    hook_id = failing_hook["id"]
    (delivery,) = deliveries(server, owner.secret, hook_id)
    theirs, own = owner.console, f"/console/orgs/{mallory.org_id}"
    with signed_in_client(server, mallory.email) as outsider:
        token = csrf_token(outsider.get(f"{own}/jobs").text)
        for org in (own, theirs):  # the job's id in their own organization's URL, or in its
            for path in (f"jobs/{job['id']}/transcript.srt", f"webhooks/{hook_id}"):
                assert outsider.get(f"{org}/{path}").status_code == 404, (org, path)
            for action in (
                f"jobs/{job['id']}/cancel",
                f"webhooks/{hook_id}/disable",
                f"webhooks/{hook_id}/delete",
                f"webhooks/{hook_id}/deliveries/{delivery['id']}/redeliver",
            ):
                answer = outsider.post(f"{org}/{action}", data={"csrf_token": token})
                assert answer.status_code == 404, (org, action)
        assert job["id"] not in outsider.get(f"{own}/jobs").text
        assert hook_id not in outsider.get(f"{own}/webhooks").text
    assert api_get(server, owner.secret, f"/webhooks/{hook_id}").json()["enabled"] is True
    assert api_get(server, owner.secret, f"/transcription-jobs/{job['id']}").status_code == 200


def test_a_failed_delivery_shows_its_attempts_and_redeliver_sends_it_again(
    console: httpx.Client,
    server: Server,
    owner: Owner,
    receiver: Receiver,
    failing_hook: dict[str, Any],
    job: dict[str, Any],
) -> None:
    hook_id = failing_hook["id"]
    page = f"{owner.console}/webhooks/{hook_id}"

    def failed() -> dict[str, Any] | None:
        (delivery,) = deliveries(server, owner.secret, hook_id)
        return delivery if delivery["status"] == "failed" else None

    delivery = polled(failed, "the delivery to a receiver answering 500 never failed")
    delivery_id = delivery["id"]
    assert [a["status_code"] for a in delivery["attempts"]] == [500, 500]
    assert receiver.answers_to(delivery_id) == [500, 500]
    shown = console.get(page).text
    attempts = row(shown, delivery_id)
    assert '<span class="badge badge-err">failed</span>' in attempts
    assert attempts.count('<span class="badge badge-err">500</span>') == 2
    assert attempts.count(" ms</span>") == 2
    assert "transcription.completed" in re.sub(r"<[^>]+>", "", attempts)

    redeliver = f"{page}/deliveries/{delivery_id}/redeliver"
    assert console.post(redeliver).status_code == 403  # without the form's token: nothing sent
    assert deliveries(server, owner.secret, hook_id)[0]["status"] == "failed"
    elsewhere = httpx.post(
        f"{server.base_url}/webhooks",
        headers=owner.headers,
        json={"url": receiver.url("/hooks/other"), "events": ["transcription.failed"]},
        timeout=60,
    ).json()["id"]
    token = csrf_token(shown)
    wrong_hook = f"{owner.console}/webhooks/{elsewhere}/deliveries/{delivery_id}/redeliver"
    assert console.post(wrong_hook, data={"csrf_token": token}).status_code == 404

    receiver.failing.discard(FAILING)  # the receiver is fixed: it answers 200 from now on
    sent = console.post(redeliver, data={"csrf_token": token})
    assert sent.status_code == 303
    assert sent.headers["location"] == f"{page}?redelivered={delivery_id}"
    notice = console.get(sent.headers["location"]).text
    assert f"Delivery {delivery_id} queued to be sent again." in notice

    polled(
        lambda: receiver.answers_to(delivery_id) == [500, 500, 200] or None,
        "the receiver never got the delivery again",
    )

    def delivered() -> str | None:
        found = row(console.get(page).text, delivery_id)
        return found if 'badge-ok">delivered<' in found else None

    attempts = polled(delivered, "the page never showed the delivery delivered")
    assert attempts.count('<span class="badge badge-ok">200</span>') == 1
    assert attempts.count('<span class="badge badge-err">500</span>') == 2
    assert audited(server, owner, delivery_id) == ["delivery_redelivered"]
