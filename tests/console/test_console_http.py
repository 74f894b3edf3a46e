"""The console's security properties, checked over HTTP against a real server."""

from __future__ import annotations

import re
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.helpers import speech_clips as clips
from tests.helpers.api import mp3_facts
from tests.helpers.console import (
    PASSWORD,
    Customer,
    cli,
    console_client,
    csrf_token,
    new_customer,
    signed_in_client,
)
from tests.helpers.servers import Server
from tests.helpers.voices import JOE, SPANISH
from voice_service.cloning.service import MIN_SPEECH_SECONDS
from voice_service.console.voices import PREVIEWS_PER_MINUTE
from voice_service.core.vocabulary import Scope
from voice_service.voices.schemas import resemblance_word


def sign_in_attempt(server: Server, email: str, password: str) -> httpx.Response:
    with console_client(server) as client:
        page = client.get("/console/sign-in")
        return client.post(
            "/console/sign-in",
            data={"email": email, "password": password, "csrf_token": csrf_token(page.text)},
        )


def test_session_cookie_and_security_headers(server: Server, alice: Customer) -> None:
    with console_client(server) as client:
        page = client.get("/console/sign-in")
        response = client.post(
            "/console/sign-in",
            data={"email": alice.email, "password": PASSWORD, "csrf_token": csrf_token(page.text)},
        )
        assert response.status_code == 303
        cookie = next(
            v
            for k, v in response.headers.multi_items()
            if k == "set-cookie" and v.startswith("vs_console=")
        )
        attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
        assert {"httponly", "path", "samesite"} <= attributes
        assert "Path=/console" in cookie and "SameSite=lax" in cookie
        keys = client.get(f"/console/orgs/{alice.org_id}/keys")
        assert keys.status_code == 200
        policy = keys.headers["content-security-policy"]
        script_src = next(d for d in policy.split(";") if d.strip().startswith("script-src"))
        assert script_src.strip() == "script-src 'self'"
        assert "frame-ancestors 'none'" in policy
        assert keys.headers["cache-control"] == "no-store"
        assert "<script>" not in keys.text  # only <script src=...>: no inline script


def test_wrong_credentials_get_one_message_whichever_was_wrong(
    server: Server, alice: Customer
) -> None:
    wrong_password = sign_in_attempt(server, alice.email, "not the password at all")
    unknown_email = sign_in_attempt(server, "nobody@example.com", PASSWORD)
    assert wrong_password.status_code == unknown_email.status_code == 401
    for response in (wrong_password, unknown_email):
        assert "Incorrect email or password." in response.text


def test_five_failures_delay_the_next_tries_even_with_the_right_password(server: Server) -> None:
    victim = new_customer(server, "victim@example.com", "Victim Org")
    for _ in range(5):
        assert sign_in_attempt(server, victim.email, "wrong password 123").status_code == 401
    refused = sign_in_attempt(server, victim.email, PASSWORD)
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.text
    actions = [e["action"] for e in cli(server, "audit", victim.account_id)]
    assert actions.count("sign_in_failed") == 5
    assert actions[0] == "sign_in_throttled"


def test_disabled_users_and_suspended_accounts_cannot_sign_in(server: Server) -> None:
    disabled = new_customer(server, "disabled@example.com", "Disabled Org")
    cli(server, "users", "disable", disabled.user_id)
    response = sign_in_attempt(server, disabled.email, PASSWORD)
    assert response.status_code == 403 and "This user is disabled" in response.text
    suspended = new_customer(server, "suspended@example.com", "Suspended Org")
    cli(server, "accounts", "suspend", suspended.account_id)
    response = sign_in_attempt(server, suspended.email, PASSWORD)
    assert response.status_code == 403 and "This account is suspended" in response.text


def test_forms_without_the_sessions_token_or_from_another_site_are_refused(
    server: Server, alice: Customer
) -> None:
    before = len(cli(server, "keys", "list", alice.org_id))
    with signed_in_client(server, alice.email) as client:
        url = f"/console/orgs/{alice.org_id}/keys"
        token = csrf_token(client.get(url).text)
        for data, headers in (
            ({"name": "no token"}, {}),
            ({"name": "wrong token", "csrf_token": token[::-1]}, {}),
            ({"name": "foreign origin", "csrf_token": token}, {"Origin": "https://evil.test"}),
        ):
            response = client.post(url, data=data, headers=headers)
            assert response.status_code == 403, data
            assert "came from another site" in response.text
        assert len(cli(server, "keys", "list", alice.org_id)) == before
        assert client.post(url, data={"name": "fine", "csrf_token": token}).status_code == 200
    assert len(cli(server, "keys", "list", alice.org_id)) == before + 1


def test_sign_out_ends_the_session_on_the_server(server: Server, alice: Customer) -> None:
    with signed_in_client(server, alice.email) as client:
        cookie = client.cookies["vs_console"]
        page = client.get("/console/orgs")
        assert page.status_code == 200
        out = client.post("/console/sign-out", data={"csrf_token": csrf_token(page.text)})
        assert out.status_code == 303
    with httpx.Client(base_url=server.root, cookies={"vs_console": cookie}) as replay:
        response = replay.get("/console/orgs")
        assert response.status_code == 303
        assert response.headers["location"] == "/console/sign-in"


@pytest.mark.parametrize(
    "page", ["keys", "usage", "requests", "jobs", "webhooks", "voices", "usage.csv"]
)
def test_another_accounts_organization_is_not_found(
    server: Server, alice: Customer, mallory: Customer, page: str
) -> None:
    with signed_in_client(server, mallory.email) as client:
        foreign = client.get(f"/console/orgs/{alice.org_id}/{page}")
        unknown = client.get(f"/console/orgs/org_doesnotexist/{page}")
        own = client.get(f"/console/orgs/{mallory.org_id}/{page}")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.text == unknown.text
    assert own.status_code == 200


def test_organizations_page_lists_only_the_users_account(
    server: Server, alice: Customer, mallory: Customer
) -> None:
    with signed_in_client(server, alice.email) as client:
        page = client.get("/console/orgs").text
    assert "Acme Studio" in page and alice.org_id in page
    assert mallory.org_name not in page


def test_usage_csv_download(server: Server, alice: Customer) -> None:
    with signed_in_client(server, alice.email) as client:
        response = client.get(
            f"/console/orgs/{alice.org_id}/usage.csv",
            params={"from": "2026-01-01", "to": "2026-01-31"},
        )
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/csv")
        assert response.text.splitlines()[0] == "date,endpoint,units,requests"
        assert "attachment" in response.headers["content-disposition"]
        bad = client.get(f"/console/orgs/{alice.org_id}/usage.csv", params={"from": "2026-13-01"})
        assert bad.status_code == 400


def test_what_a_tenant_typed_is_escaped(server: Server, alice: Customer) -> None:
    with signed_in_client(server, alice.email) as client:
        url = f"/console/orgs/{alice.org_id}/keys"
        token = csrf_token(client.get(url).text)
        client.post(url, data={"name": "<script>alert(1)</script>", "csrf_token": token})
        page = client.get(url).text
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_sign_in_and_key_changes_are_audited(server: Server) -> None:
    carol = new_customer(server, "carol@example.com", "Carol Org")
    assert sign_in_attempt(server, carol.email, "a wrong password!").status_code == 401
    with signed_in_client(server, carol.email) as client:
        url = f"/console/orgs/{carol.org_id}/keys"
        token = csrf_token(client.get(url).text)
        client.post(url, data={"name": "audited", "csrf_token": token})
        [key] = cli(server, "keys", "list", carol.org_id)
        revoked = client.post(f"{url}/{key['id']}/revoke", data={"csrf_token": token})
        assert revoked.status_code == 303
    events = cli(server, "audit", carol.account_id)
    assert [e["action"] for e in events] == [
        "key_revoked",
        "key_created",
        "sign_in",
        "sign_in_failed",
    ]
    assert all(e["email"] == carol.email for e in events)
    assert key["id"] in events[0]["target"] and key["id"] in events[1]["target"]
    assert cli(server, "keys", "list", carol.org_id)[0]["revoked_at"] is not None


@pytest.mark.parametrize(
    "period",
    [
        {"to": "0001-01-01"},  # the default 30 days would start before year 1
        {"from": "9999-12-31"},  # and end today
    ],
)
def test_usage_periods_past_the_calendars_ends_are_the_forms_error(
    server: Server, alice: Customer, period: dict[str, str]
) -> None:
    with signed_in_client(server, alice.email) as client:
        page = client.get(f"/console/orgs/{alice.org_id}/usage", params=period)
        csv = client.get(f"/console/orgs/{alice.org_id}/usage.csv", params=period)
    assert page.status_code == csv.status_code == 400
    assert "Showing the last 30 days." in page.text
    assert csv.headers["content-type"].startswith("text/plain")


def test_usage_of_the_calendars_last_days(server: Server, alice: Customer) -> None:
    period = {"from": "9999-12-02", "to": "9999-12-31"}
    with signed_in_client(server, alice.email) as client:
        page = client.get(f"/console/orgs/{alice.org_id}/usage", params=period)
        csv = client.get(f"/console/orgs/{alice.org_id}/usage.csv", params=period)
    assert page.status_code == csv.status_code == 200
    assert "No billed usage from 9999-12-02 to 9999-12-31." in page.text
    assert csv.text.splitlines() == ["date,endpoint,units,requests"]


# Digits to `str.isdigit` or `int`, not to the form.
NOT_ASCII_DIGITS = (
    "\u00b2",  # superscript two: a digit to str.isdigit, which int refuses
    "\u0665\u0660",  # Arabic-Indic 50
    "\uff15\uff10",  # fullwidth 50
)


def test_a_key_rate_limit_is_written_in_ascii_digits(server: Server) -> None:
    judy = new_customer(server, "judy@example.com", "Judy Org")
    url = f"/console/orgs/{judy.org_id}/keys"
    with signed_in_client(server, judy.email) as client:
        token = csrf_token(client.get(url).text)
        for rate_limit in (*NOT_ASCII_DIGITS, "0", "1" * 5000):  # int refuses 4300 digits
            form = {"name": "limited", "rate_limit": rate_limit, "csrf_token": token}
            response = client.post(url, data=form)
            assert response.status_code == 400, ascii(rate_limit)
            assert "The rate limit is a whole number of requests per minute" in response.text
    assert cli(server, "keys", "list", judy.org_id) == []


def test_parallel_try_it_requests_make_one_console_key(server: Server) -> None:
    erin = new_customer(server, "erin@example.com", "Erin Org")
    with signed_in_client(server, erin.email) as client:
        token = csrf_token(client.get(f"/console/orgs/{erin.org_id}/voices").text)
        cookies = client.cookies
    form = {"csrf_token": token, "text": "Hi.", "voice_id": JOE}
    url = f"/console/orgs/{erin.org_id}/text-to-speech"
    with (
        httpx.Client(base_url=server.root, cookies=cookies, timeout=120) as c,
        ThreadPoolExecutor(max_workers=8) as threads,
    ):
        answers = list(threads.map(lambda _: c.post(url, data=form), range(8)))
    assert [answer.status_code for answer in answers] == [200] * 8
    keys = cli(server, "keys", "list", erin.org_id)
    assert [key["prefix"] for key in keys] == ["console"]


def test_voice_previews_are_rate_limited_per_user(server: Server, mallory: Customer) -> None:
    frank = new_customer(server, "frank@example.com", "Frank Org")
    url = f"/console/orgs/{frank.org_id}/voices/{JOE}/preview"
    with signed_in_client(server, frank.email) as client:
        allowed = [client.get(url).status_code for _ in range(PREVIEWS_PER_MINUTE)]
        refused = client.get(url)
    assert allowed == [200] * PREVIEWS_PER_MINUTE
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert "voice previews" in refused.text
    with signed_in_client(server, mallory.email) as client:  # another user's own budget
        assert client.get(f"/console/orgs/{mallory.org_id}/voices/{JOE}/preview").is_success


def test_every_console_response_says_nosniff(server: Server) -> None:
    heidi = new_customer(server, "heidi@example.com", "Heidi Org")
    org = f"/console/orgs/{heidi.org_id}"
    with signed_in_client(server, heidi.email) as client:
        token = csrf_token(client.get(f"{org}/voices").text)
        speak = {"csrf_token": token, "text": "Hi.", "voice_id": JOE}
        unknown_voice = {**speak, "voice_id": "voice_nope"}
        json_only = {"Accept": "application/json"}
        responses = {
            "page": (client.get(f"{org}/keys"), 200),
            "redirect": (client.get("/console"), 303),
            "static file": (client.get("/console/static/console.js"), 200),
            "missing static file": (client.get("/console/static/nothing.js"), 404),
            "preview audio": (client.get(f"{org}/voices/{JOE}/preview"), 200),
            "try it audio": (client.post(f"{org}/text-to-speech", data=speak), 200),
            "json error": (
                client.post(f"{org}/text-to-speech", data=unknown_voice, headers=json_only),
                404,
            ),
            "wrong method": (client.delete(f"{org}/keys"), 405),
            "csv": (client.get(f"{org}/usage.csv"), 200),
        }
    for name, (response, status) in responses.items():
        assert response.status_code == status, name
        assert response.headers.get("x-content-type-options") == "nosniff", name
    refused = _raw_answer_head(server, _OVERSIZED)
    assert refused.startswith(b"http/1.1 413"), refused
    assert b"\r\nx-content-type-options: nosniff\r\n" in refused


# Refused by the request middleware, before any route: a body over the cap.
_OVERSIZED = (
    b"POST /console/sign-in HTTP/1.1\r\nHost: test\r\nContent-Length: 999999999\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n\r\n"
)


def _raw_answer_head(server: Server, request: bytes) -> bytes:
    with socket.create_connection(server.address, timeout=60) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    return answer.partition(b"\r\n\r\n")[0].lower() + b"\r\n"  # each header line ends


def test_keys_are_created_with_scopes_and_a_cap_and_listed_so(server: Server) -> None:
    ivan = new_customer(server, "ivan@example.com", "Ivan Org")
    url = f"/console/orgs/{ivan.org_id}/keys"
    with signed_in_client(server, ivan.email) as client:
        page = client.get(url)
        token = csrf_token(page.text)
        assert page.text.count('type="checkbox" name="scopes"') == len(Scope)  # one box per scope
        nothing = {"name": "none", "scopes_offered": "1", "csrf_token": token}
        refused = client.post(url, data=nothing)
        assert refused.status_code == 400 and "at least one of the scopes" in refused.text
        for cap in ("-1", "1e3", "\uff15"):
            form = {"name": "capped", "monthly_units": cap, "csrf_token": token}
            assert client.post(url, data=form).status_code == 400, ascii(cap)
        scoped = {
            "name": "reporting",
            "scopes_offered": "1",
            "scopes": ["usage:read", "voices:read"],
            "monthly_units": "5000",
            "csrf_token": token,
        }
        created = client.post(url, data=scoped)
        assert created.status_code == 200
        every = {"name": "all", "scopes_offered": "1", "csrf_token": token}
        client.post(url, data={**every, "scopes": [scope.value for scope in Scope]})
        listing = client.get(url).text
    keys = {key["name"]: key for key in cli(server, "keys", "list", ivan.org_id)}
    assert (keys["reporting"]["scopes"], keys["reporting"]["monthly_units"]) == (
        ["usage:read", "voices:read"],
        5000,
    )
    assert (keys["all"]["scopes"], keys["all"]["monthly_units"]) == (None, None)
    assert "<code>usage:read</code> <code>voices:read</code>" in listing
    assert "5,000 units/month" in listing


def speak(server: Server, headers: dict[str, str], text: str) -> None:
    """Text to speech through the API, as a customer's program calls it: 200."""
    spoken = httpx.post(
        f"{server.base_url}/text-to-speech",
        headers=headers,
        json={"text": text, "voice_id": JOE},
        timeout=60,
    )
    assert spoken.status_code == 200, spoken.text


def test_usage_by_key_and_voice_on_the_page_and_in_the_csv(server: Server) -> None:
    kate = new_customer(server, "kate@example.com", "Kate Org")
    secret = cli(server, "keys", "create", kate.org_id, "--name", "batch")["secret"]
    speak(server, {"Authorization": f"Bearer {secret}"}, "Hello.")
    usage = f"/console/orgs/{kate.org_id}/usage"
    with signed_in_client(server, kate.email) as client:
        by_key = client.get(usage, params={"group_by": "key"})
        by_voice = client.get(usage, params={"group_by": "voice"})
        csv_by_key = client.get(f"{usage}.csv", params={"group_by": "key"})
        csv_by_voice = client.get(f"{usage}.csv", params={"group_by": "voice"})
    assert "Totals by api key" in by_key.text and "batch (" in by_key.text
    assert "Totals by voice" in by_voice.text and f'title="{JOE}"' in by_voice.text
    header, row = csv_by_key.text.splitlines()
    assert header == "date,key_id,key_prefix,key_name,units,requests"
    assert row.endswith(",batch,6,1")
    header, row = csv_by_voice.text.splitlines()
    assert header == "date,voice_id,voice_name,units,requests" and JOE in row
    assert row.endswith(",6,1")


def test_the_request_log_marks_replayed_answers(server: Server) -> None:
    leo = new_customer(server, "leo@example.com", "Leo Org")
    secret = cli(server, "keys", "create", leo.org_id)["secret"]
    headers = {"Authorization": f"Bearer {secret}", "Idempotency-Key": "once"}
    for _ in range(2):
        speak(server, headers, "Hi")
    with signed_in_client(server, leo.email) as client:
        page = client.get(f"/console/orgs/{leo.org_id}/requests").text
    assert page.count(">replayed</span>") == 1


def catalogue_ids(page: str) -> list[str]:
    """The voices the page's catalogue table lists, in order."""
    catalogue = page.split('<section id="catalogue"', 1)[1]
    return re.findall(r'<tr data-voice="(voice_\w+)"', catalogue)


def test_the_catalogue_is_searched_by_name_and_language_on_the_server(
    server: Server, alice: Customer
) -> None:
    listed = httpx.get(
        f"{server.base_url}/voices",
        headers={"Authorization": f"Bearer {server.api_key}"},
        timeout=60,
    ).json()["voices"]
    catalogue = [voice for voice in listed if voice["type"] == "PROVIDER"]
    url = f"/console/orgs/{alice.org_id}/voices"
    with signed_in_client(server, alice.email) as client:
        everything = client.get(url).text
        by_name = client.get(url, params={"q": "  KUMO "}).text
        spanish = client.get(url, params={"language": "es"}).text
        both = client.get(url, params={"q": "kumo", "language": "es"}).text
        unknown_language = client.get(url, params={"language": "xx"}).text
    assert catalogue_ids(everything) == [voice["id"] for voice in catalogue]
    assert '<option value="es">es</option>' in everything
    kumo = [voice["id"] for voice in catalogue if "kumo" in voice["name"].lower()]
    assert 1 < len(kumo) < len(catalogue) and catalogue_ids(by_name) == kumo
    assert 'value="KUMO"' in by_name  # the search stays in its box
    speaks_spanish = [
        voice["id"]
        for voice in catalogue
        if voice["language"] is None or voice["language"].split("-")[0] == "es"
    ]
    assert SPANISH in speaks_spanish and catalogue_ids(spanish) == speaks_spanish
    assert catalogue_ids(both) == [SPANISH]
    assert catalogue_ids(unknown_language) == catalogue_ids(everything)


def test_a_clone_from_the_console_redirects_to_the_voices_page_naming_it(
    server: Server, tmp_path: Path
) -> None:
    nina = new_customer(server, "nina@example.com", "Nina Org")
    sample = clips.write_audio(tmp_path / "s.wav", clips.english_speech(), "wav-s16")
    voices = f"/console/orgs/{nina.org_id}/voices"
    with signed_in_client(server, nina.email) as client:
        form = {"csrf_token": csrf_token(client.get(voices).text), "name": "Nina", "consent": "yes"}
        cloned = client.post(
            f"{voices}/clone",
            data=form,
            files={"file": ("s.wav", sample.read_bytes(), "audio/wav")},
            timeout=180,
        )
        assert cloned.status_code == 303, cloned.text
        match = re.fullmatch(rf"{voices}\?cloned=(voice_\w+)", cloned.headers["location"])
        assert match is not None, cloned.headers["location"]
        shown = client.get(cloned.headers["location"]).text
        plain = client.get(voices).text
        not_a_clone = client.get(voices, params={"cloned": JOE}).text
        log = client.get(
            f"/console/orgs/{nina.org_id}/requests",
            params={"request_id": cloned.headers["x-request-id"]},
        ).text
        reloaded = client.get(f"{voices}/clone")
    secret = cli(server, "keys", "create", nina.org_id)["secret"]
    api = httpx.get(
        f"{server.base_url}/voices/{match.group(1)}",
        headers={"Authorization": f"Bearer {secret}"},
    ).json()["voice"]
    assert "Voice “Nina” cloned." in shown
    assert f'<tr data-voice="{match.group(1)}" class="highlight">' in shown
    # How much it sounds like its sample: the API's figure, with its word.
    word = resemblance_word(api["resemblance"])
    assert word is not None
    row = shown.split(f'data-voice="{match.group(1)}"')[1].split("</tr>")[0]
    assert f'data-resemblance="{word}"' in row
    assert f'{word.capitalize()}</span> <span class="muted small">{api["resemblance"]:.2f}' in row
    for page in (plain, not_a_clone):
        assert "cloned.</div>" not in page and 'class="highlight"' not in page
    assert 'badge-ok">201</span>' in log  # the row says what was made, as the API's does
    assert reloaded.status_code == 303 and reloaded.headers["location"] == voices


def test_one_unit_is_written_in_the_singular(server: Server) -> None:
    olga = new_customer(server, "olga@example.com", "Olga Org")
    cli(server, "keys", "create", olga.org_id, "--name", "capped", "--monthly-units", "1")
    secret = cli(server, "keys", "create", olga.org_id, "--name", "speaker")["secret"]
    speak(server, {"Authorization": f"Bearer {secret}"}, "A")
    org = f"/console/orgs/{olga.org_id}"
    with signed_in_client(server, olga.email) as client:
        keys = client.get(f"{org}/keys").text
        usage = client.get(f"{org}/usage").text
        log = client.get(f"{org}/requests").text
    assert "1 unit/month" in keys
    assert '<strong>1</strong><span class="muted small">unit</span>' in usage
    assert ": 1 unit</title>" in usage  # the chart's bar
    assert 'title="1 unit billed under text-to-speech"' in log
    for page in (keys, usage, log):
        assert not re.search(r"\b1 units\b", page)


def test_the_keys_and_voices_pages_say_what_the_api_takes(server: Server, alice: Customer) -> None:
    """A key works on the OpenAI-compatible /v1 too; a clone's sample may be as short as the
    analysis allows (the page asked for 10 to 30 s, which is only what is best)."""
    with signed_in_client(server, alice.email) as client:
        keys = client.get(f"/console/orgs/{alice.org_id}/keys").text
        voices = client.get(f"/console/orgs/{alice.org_id}/voices").text
    assert "<code>/api/v1</code> and to the OpenAI-compatible <code>/v1</code>" in keys
    assert "10\N{EN DASH}30 s of speech is best" in voices
    assert f"at least {MIN_SPEECH_SECONDS:g} s of speech is needed" in voices


def test_try_it_speaks_at_the_speed_asked(server: Server) -> None:
    petra = new_customer(server, "petra@example.com", "Petra Org")
    with signed_in_client(server, petra.email) as client:
        page = client.get(f"/console/orgs/{petra.org_id}/voices").text
        assert 'name="speed"' in page and 'min="0.25" max="4.0"' in page
        url = f"/console/orgs/{petra.org_id}/text-to-speech"
        form = {"csrf_token": csrf_token(page), "text": "The keeper lit the lamp.", "voice_id": JOE}
        seconds = {}
        for speed in ("1", "1.5"):
            answer = client.post(url, data={**form, "speed": speed})
            assert answer.status_code == 200, answer.text
            seconds[speed] = mp3_facts(answer.content)[1]
        # As the page's script asks: errors in the API's envelope.
        accept = {"Accept": "application/json, audio/mpeg"}
        refused = client.post(url, data={**form, "speed": "9"}, headers=accept)
    assert seconds["1.5"] / seconds["1"] == pytest.approx(1 / 1.5, rel=0.1)
    assert refused.status_code == 400
    assert "speed" in refused.json()["error"]["message"]


def test_try_it_says_words_as_a_chosen_dictionary_does(server: Server) -> None:
    quinn = new_customer(server, "quinn@example.com", "Quinn Org")
    api = {"Authorization": f"Bearer {cli(server, 'keys', 'create', quinn.org_id)['secret']}"}
    made = httpx.post(
        f"{server.base_url}/pronunciation-dictionaries/add-from-rules",
        headers=api,
        json={
            "name": "Our stack",
            "rules": [{"type": "alias", "string_to_replace": "VS", "alias": "Voice Service"}],
        },
    )
    assert made.status_code == 201, made.text
    dictionary = made.json()["id"]
    text = "Welcome to VS."
    as_the_api_says = httpx.post(
        f"{server.base_url}/text-to-speech",
        headers=api,
        json={
            "text": text,
            "voice_id": JOE,
            "pronunciation_dictionary_locators": [{"pronunciation_dictionary_id": dictionary}],
        },
        timeout=60,
    )
    with signed_in_client(server, quinn.email) as client:
        page = client.get(f"/console/orgs/{quinn.org_id}/voices").text
        assert f'<option value="{dictionary}">Our stack</option>' in page
        url = f"/console/orgs/{quinn.org_id}/text-to-speech"
        form = {"csrf_token": csrf_token(page), "text": text, "voice_id": JOE}
        plain = client.post(url, data={**form, "pronunciation_dictionary_id": ""})
        ruled = client.post(url, data={**form, "pronunciation_dictionary_id": dictionary})
        accept = {"Accept": "application/json, audio/mpeg"}
        missing = client.post(
            url, data={**form, "pronunciation_dictionary_id": "pd_missing"}, headers=accept
        )
        made_default = httpx.patch(
            f"{server.base_url}/pronunciation-dictionaries/{dictionary}",
            headers=api,
            json={"default": True},
        )
        by_default = client.post(url, data={**form, "pronunciation_dictionary_id": ""})
        without = client.post(url, data={**form, "pronunciation_dictionary_id": "none"})
    assert ruled.status_code == 200, ruled.text
    assert ruled.content == as_the_api_says.content != plain.content
    assert missing.status_code == 404
    assert made_default.status_code == 200, made_default.text
    assert by_default.content == ruled.content  # the organization's defaults
    assert without.content == plain.content
