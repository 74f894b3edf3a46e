"""The Pronunciation page over HTTP and in Debian's Chromium, against the console's real
server: a PLS file uploaded with the form is listed newest first, its page shows the latest
version's rules and downloads it as the API does, and it is deleted after a confirmation;
files the API refuses are refused on the page with the API's reason. Another account sees
none of it. Nothing here speaks."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.console.browsing import DESKTOP, shoot, signed_in
from tests.helpers.console import Customer, cli, csrf_token, new_customer, signed_in_client
from tests.helpers.console_jobs import api_get
from tests.helpers.servers import Server
from voice_service.pronunciation import pls
from voice_service.pronunciation.rules import MAX_RULES

TOM_IPA = "\u02c8t\u0251\u02d0m"  # IPA for "Tom", escaped to be unambiguous
LEXICON = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" '
    'alphabet="ipa" xml:lang="en-GB">'
    "<lexeme><grapheme>VS</grapheme><alias>Voice Service</alias></lexeme>"
    f"<lexeme><grapheme>Bob</grapheme><phoneme>{TOM_IPA}</phoneme></lexeme>"
    '<lexeme><grapheme>Acme</grapheme><phoneme alphabet="x-cmu">AE1 K M IY0</phoneme></lexeme>'
    "</lexicon>"
).encode()
BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lexicon [<!ENTITY a "lol">'
    b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
    b"<lexicon><lexeme><grapheme>x</grapheme><alias>&c;</alias></lexeme></lexicon>"
)
ALERT = re.compile(r'<div class="alert alert-error" role="alert">(.*?)</div>', re.DOTALL)


def lexicon_of(count: int) -> bytes:
    """A PLS file of `count` alias rules, each for a word of its own."""
    lexemes = "".join(
        f"<lexeme><grapheme>w{n}</grapheme><alias>v</alias></lexeme>" for n in range(count)
    )
    return f"<lexicon>{lexemes}</lexicon>".encode()


@dataclass(frozen=True)
class Owner:
    customer: Customer
    secret: str  # an API key of the organization

    @property
    def console(self) -> str:
        return f"/console/orgs/{self.customer.org_id}/pronunciation"

    def api(self, method: str, server: Server, path: str, **json: Any) -> httpx.Response:
        """The API's answer about the organization's dictionaries; `json`: the body."""
        return httpx.request(
            method,
            f"{server.base_url}/pronunciation-dictionaries{path}",
            headers={"Authorization": f"Bearer {self.secret}"},
            json=json or None,
            timeout=60,
        )

    def listed(self, server: Server) -> list[dict[str, Any]]:
        """Every dictionary of the organization, as the API lists them."""
        found = api_get(server, self.secret, "/pronunciation-dictionaries", page_size="100")
        assert found.status_code == 200, found.text
        dictionaries: list[dict[str, Any]] = found.json()["pronunciation_dictionaries"]
        return dictionaries


@pytest.fixture(scope="module")
def owner(server: Server) -> Owner:
    customer = new_customer(server, "words-owner@example.com", "Words Org")
    secret = cli(server, "keys", "create", customer.org_id, "--name", "words")["secret"]
    return Owner(customer, secret)


@pytest.fixture(scope="module")
def console(server: Server, owner: Owner) -> Iterator[httpx.Client]:
    """The owner signed in to the console, for the whole module."""
    with signed_in_client(server, owner.customer.email) as client:
        yield client


def upload(
    console: httpx.Client,
    owner: Owner,
    document: bytes,
    name: str,
    *,
    token: str | None = None,
    description: str = "",
) -> httpx.Response:
    if token is None:
        token = csrf_token(console.get(owner.console).text)
    return console.post(
        owner.console,
        data={"name": name, "description": description, "csrf_token": token},
        files={"file": ("words.pls", document, "application/pls+xml")},
    )


def created(console: httpx.Client, owner: Owner, document: bytes, name: str) -> str:
    """The id of a dictionary made with the form."""
    made = upload(console, owner, document, name)
    assert made.status_code == 303, made.text
    match = re.fullmatch(rf"{owner.console}\?created=(pd_\w+)", made.headers["location"])
    assert match is not None, made.headers["location"]
    return match.group(1)


def row(page: str, text: str) -> str:
    """The one table row of the page that contains `text`."""
    rows = [found for found in re.findall(r"<tr[ >].*?</tr>", page, re.DOTALL) if text in found]
    assert len(rows) == 1, f"{len(rows)} rows with {text!r}"
    return rows[0]


def shown_text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def stored(server: Server, dictionary_id: str) -> list[Any]:
    return server.query(
        "SELECT latest_version_id, latest_rules FROM pronunciation_dictionaries WHERE id = ?",
        dictionary_id,
    )


def audited(server: Server, owner: Owner, target: str) -> list[str]:
    """The account's audit actions on `target`, newest first, as an operator reads them."""
    rows = server.query(
        "SELECT action FROM audit_log WHERE account_id = ? AND target LIKE ? "
        "ORDER BY created_at DESC, rowid DESC",
        owner.customer.account_id,
        f"%{target}%",
    )
    return [found["action"] for found in rows]


def test_an_organization_without_dictionaries_has_an_empty_pronunciation_tab(
    server: Server,
) -> None:
    customer = new_customer(server, "no-words@example.com", "No Words Org")
    with signed_in_client(server, customer.email) as client:
        page = client.get(f"/console/orgs/{customer.org_id}/keys")
        tab = f'<a href="/console/orgs/{customer.org_id}/pronunciation">Pronunciation</a>'
        assert tab in page.text
        listed = client.get(f"/console/orgs/{customer.org_id}/pronunciation")
    assert listed.status_code == 200
    assert 'aria-current="page">Pronunciation</a>' in listed.text
    assert "No pronunciation dictionaries yet." in listed.text


def test_an_uploaded_file_is_listed_newest_first_with_its_rules_and_latest_version(
    console: httpx.Client, server: Server, owner: Owner
) -> None:
    first = created(console, owner, LEXICON, "Brand names")
    made = upload(console, owner, lexicon_of(2), "Product words", description="For the launch")
    second = made.headers["location"].rpartition("=")[2]

    page = console.get(made.headers["location"])
    assert page.status_code == 200
    assert "Dictionary “Product words” created with 2 rules." in page.text
    assert page.text.index(second) < page.text.index(first)  # newest first
    [(version, rules)] = stored(server, second)
    listed = row(page.text, second)
    assert 'class="highlight"' in listed and "For the launch" in listed
    assert f'href="{owner.console}/{second}"' in listed and ">Product words<" in listed
    assert f">{rules}</td>" in listed and rules == 2
    assert version in listed and ">Active<" in listed
    assert re.search(r">\d{4}-\d\d-\d\d \d\d:\d\d</td>", listed)
    assert 'class="highlight"' not in row(page.text, first)
    assert audited(server, owner, second) == ["pronunciation_dictionary_created"]
    api = owner.api("GET", server, f"/{second}").json()
    assert (api["name"], api["description"], api["latest_version_id"]) == (
        "Product words",
        "For the launch",
        version,
    )


def test_an_archived_dictionary_is_listed_as_archived(
    console: httpx.Client, server: Server, owner: Owner
) -> None:
    dictionary_id = created(console, owner, lexicon_of(1), "Old words")
    assert owner.api("PATCH", server, f"/{dictionary_id}", archived=True).status_code == 200
    listed = row(console.get(owner.console).text, dictionary_id)
    assert ">Archived<" in listed and ">Active<" not in listed


def test_a_dictionary_is_made_a_default_and_no_longer_one_from_its_page(
    console: httpx.Client, server: Server, owner: Owner
) -> None:
    made = [created(console, owner, lexicon_of(1), f"Default {n}") for n in range(4)]

    def set_default(dictionary_id: str, value: str) -> httpx.Response:
        page = console.get(f"{owner.console}/{dictionary_id}").text
        return console.post(
            f"{owner.console}/{dictionary_id}/default",
            data={"csrf_token": csrf_token(page), "default": value},
        )

    for dictionary_id in made[:3]:
        assert set_default(dictionary_id, "true").status_code == 303
    assert ">Default<" in row(console.get(owner.console).text, made[0])
    page = console.get(f"{owner.console}/{made[0]}").text
    assert ">Default<" in page and "Stop using as a default" in page
    fourth = set_default(made[3], "true")
    assert fourth.status_code == 400
    assert "at most 3 default dictionaries" in shown_text(fourth.text)
    assert set_default(made[0], "false").status_code == 303
    defaults = {d["id"] for d in owner.listed(server) if d["default"]}
    assert defaults == set(made[1:3])
    for dictionary_id in made[1:3]:  # leave the organization as the other tests expect it
        set_default(dictionary_id, "false")


@pytest.mark.parametrize(
    ("document", "name", "status", "message"),
    [
        (b"<speak>Hello</speak>", "Not PLS", 400, "the root element is <speak>, not <lexicon>"),
        (b"plain text", "Not XML", 400, "the file is not well-formed XML"),
        (BILLION_LAUGHS, "Laughs", 400, "the file holds XML this service refuses"),
        (b"<lexicon>" + b" " * (1024 * 1024) + b"</lexicon>", "Big", 413, "exceeds the 1 MB"),
        (lexicon_of(MAX_RULES + 1), "Many", 400, f"at most {MAX_RULES} rules"),
        (
            b'<lexicon><lexeme><grapheme>Bob</grapheme><phoneme alphabet="x-cmu">T Q1</phoneme>'
            b"</lexeme></lexicon>",
            "Unsayable",
            400,
            "'Q1'",
        ),
        (LEXICON, " ", 400, "name: 1 to 100 characters are required."),
    ],
    ids=[
        "not-a-lexicon",
        "not-xml",
        "billion-laughs",
        "too-large",
        "too-many-rules",
        "bad-phoneme",
        "no-name",
    ],
)
def test_a_refused_file_is_said_on_the_page_and_makes_nothing(
    console: httpx.Client,
    server: Server,
    owner: Owner,
    document: bytes,
    name: str,
    status: int,
    message: str,
) -> None:
    before = owner.listed(server)
    answer = upload(console, owner, document, name, description="kept")
    assert answer.status_code == status, answer.text
    alert = ALERT.search(answer.text)
    assert alert is not None and message in html.unescape(alert.group(1)), answer.text
    assert "Traceback" not in answer.text
    # The form keeps what was typed, but for a file refused by its size: its fields are not read.
    assert ('value="kept"' in answer.text) is (status != 413)
    assert owner.listed(server) == before


def test_an_upload_without_the_forms_token_is_refused(
    console: httpx.Client, server: Server, owner: Owner
) -> None:
    before = owner.listed(server)
    answer = upload(console, owner, LEXICON, "Forged", token="forged")
    assert answer.status_code == 403
    assert owner.listed(server) == before


def test_a_dictionarys_page_shows_its_latest_versions_rules(
    console: httpx.Client, server: Server, owner: Owner
) -> None:
    dictionary_id = created(console, owner, LEXICON, "Latest words")
    added = owner.api(
        "POST",
        server,
        f"/{dictionary_id}/add-rules",
        rules=[{"type": "alias", "string_to_replace": "VS", "alias": "Versus"}],
    )
    assert added.status_code == 200, added.text
    version = added.json()["version_id"]

    page = console.get(f"{owner.console}/{dictionary_id}")
    assert page.status_code == 200
    assert f'version <span class="mono">{version}</span>' in page.text
    assert 'lang="en-GB"' in page.text and "3 rules" in page.text
    alias = shown_text(row(page.text, ">VS<"))
    assert "alias" in alias and "Versus" in alias and "Voice Service" not in alias
    ipa = shown_text(row(page.text, ">Bob<"))
    assert "phoneme" in ipa and TOM_IPA in ipa and "IPA" in ipa
    arpabet = shown_text(row(page.text, ">Acme<"))
    assert "AE1 K M IY0" in arpabet and "CMU Arpabet" in arpabet
    assert "exact case, whole words" in arpabet
    download = f"{owner.console}/{dictionary_id}/{version}/download"
    assert f'href="{download}"' in page.text


def test_a_long_dictionary_shows_its_first_thousand_rules(
    console: httpx.Client, owner: Owner
) -> None:
    dictionary_id = created(console, owner, lexicon_of(1001), "Long words")
    page = console.get(f"{owner.console}/{dictionary_id}").text
    assert "the first 1,000 of 1,001: the PLS file has them all" in page
    assert ">w999<" in page and ">w1000<" not in page


def test_the_download_is_the_apis_pls_file_of_the_version(
    console: httpx.Client, server: Server, owner: Owner
) -> None:
    dictionary_id = created(console, owner, LEXICON, "Downloaded words")
    [(version, _)] = stored(server, dictionary_id)
    got = console.get(f"{owner.console}/{dictionary_id}/{version}/download")
    api = owner.api("GET", server, f"/{dictionary_id}/{version}/download")
    assert got.status_code == api.status_code == 200
    assert got.content == api.content
    assert got.headers["content-type"] == api.headers["content-type"] == "application/pls+xml"
    disposition = f'attachment; filename="{dictionary_id}.pls"'
    assert got.headers["content-disposition"] == disposition
    assert got.headers["x-content-type-options"] == "nosniff"
    read = pls.read(got.content, 10)
    assert read.language == "en-GB"
    assert [rule["string_to_replace"] for rule in read.rules] == ["VS", "Bob", "Acme"]
    assert console.get(f"{owner.console}/{dictionary_id}/pdv_none/download").status_code == 404


def test_a_dictionary_is_deleted_after_a_confirmation(
    console: httpx.Client, server: Server, owner: Owner
) -> None:
    dictionary_id = created(console, owner, LEXICON, "Doomed words")
    page = f"{owner.console}/{dictionary_id}"
    confirm = console.get(f"{page}/delete")
    assert confirm.status_code == 200
    assert "Yes, delete this dictionary" in confirm.text and "Doomed words" in confirm.text
    assert console.post(f"{page}/delete").status_code == 403  # without the form's token
    assert owner.api("GET", server, f"/{dictionary_id}").status_code == 200

    gone = console.post(f"{page}/delete", data={"csrf_token": csrf_token(confirm.text)})
    assert gone.status_code == 303 and gone.headers["location"] == owner.console
    assert owner.api("GET", server, f"/{dictionary_id}").status_code == 404
    assert console.get(page).status_code == 404
    assert dictionary_id not in console.get(owner.console).text
    assert audited(server, owner, dictionary_id) == [
        "pronunciation_dictionary_deleted",
        "pronunciation_dictionary_created",
    ]


def test_another_accounts_user_gets_404_for_the_dictionary(
    console: httpx.Client, server: Server, owner: Owner, mallory: Customer
) -> None:
    dictionary_id = created(console, owner, LEXICON, "Private words")
    [(version, _)] = stored(server, dictionary_id)
    theirs, own = owner.console, f"/console/orgs/{mallory.org_id}/pronunciation"
    with signed_in_client(server, mallory.email) as outsider:
        token = csrf_token(outsider.get(own).text)
        for base in (own, theirs):  # the id in their own organization's URL, or in its
            for path in ("", "/delete", f"/{version}/download"):
                url = f"{base}/{dictionary_id}{path}"
                assert outsider.get(url).status_code == 404, url
            deleted = outsider.post(f"{base}/{dictionary_id}/delete", data={"csrf_token": token})
            assert deleted.status_code == 404, base
        assert dictionary_id not in outsider.get(own).text
    assert owner.api("GET", server, f"/{dictionary_id}").status_code == 200


def test_a_customer_uploads_opens_and_deletes_a_dictionary_in_a_browser(
    browser: Any, server: Server, owner: Owner
) -> None:
    expect = pytest.importorskip("playwright.sync_api").expect
    context, page = signed_in(browser, server, owner.customer.email, viewport=DESKTOP)
    try:
        page.goto(f"{server.root}{owner.console.rpartition('/')[0]}/keys")
        page.get_by_role("link", name="Pronunciation", exact=True).click()
        expect(page.get_by_role("heading", name="Pronunciation", exact=True)).to_be_visible()

        page.get_by_role("button", name="Upload dictionary").click()
        page.get_by_label("Name").fill("Browser words")
        file = {"name": "words.pls", "mimeType": "application/pls+xml", "buffer": LEXICON}
        page.get_by_label("PLS file").set_input_files(file)
        page.get_by_role("button", name="Upload", exact=True).click()
        expect(page.get_by_role("status")).to_have_text(
            "Dictionary “Browser words” created with 3 rules."
        )
        listed = page.get_by_role("row").filter(has_text="Browser words")
        expect(listed).to_have_count(1)
        shoot(page, "pronunciation")

        listed.get_by_role("link", name="Browser words").click()
        expect(page.get_by_role("heading", name="Browser words")).to_be_visible()
        rules = page.get_by_role("table", name="Rules")
        for said, cells in (
            ("Voice Service", ["VS", "alias", "Voice Service", "exact case, whole words"]),
            (TOM_IPA, ["Bob", "phoneme", f"{TOM_IPA} IPA", "exact case, whole words"]),
            ("AE1", ["Acme", "phoneme", "AE1 K M IY0 CMU Arpabet", "exact case, whole words"]),
        ):
            rule = rules.get_by_role("row").filter(has_text=said)
            expect(rule.get_by_role("cell")).to_have_text(cells)
        expect(page.get_by_role("link", name="Download PLS")).to_be_visible()
        shoot(page, "pronunciation-dictionary")

        page.get_by_role("button", name="Delete").click()
        question = page.get_by_role("heading", name="Delete the dictionary Browser words?")
        expect(question).to_be_visible()
        page.get_by_role("button", name="Yes, delete this dictionary").click()
        expect(page.get_by_role("heading", name="Pronunciation", exact=True)).to_be_visible()
        expect(page.get_by_role("row").filter(has_text="Browser words")).to_have_count(0)
    finally:
        context.close()
