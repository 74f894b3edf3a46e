"""Pronunciation dictionaries over the API (ElevenLabs' shape): made from rules or a PLS
file, a new version on each change, another organization's not found; named by a speech
request, heard through the node's Whisper, timed by the words as written, never billed."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.api import assert_error, transcribe, usage_units
from tests.helpers.app import Tenant, Tenants
from tests.helpers.voices import JOE
from tests.helpers.wav import wav_bytes
from voice_service.pronunciation import pls

pytestmark = pytest.mark.anyio

TEXT = "Please ask Bob to call VS today."
RULES = [
    {"type": "alias", "string_to_replace": "VS", "alias": "Voice Service"},
    {
        "type": "phoneme",
        "string_to_replace": "Bob",
        "phoneme": "T AA1 M",
        "alphabet": "cmu-arpabet",
    },
]
LEXICON = (
    b'<?xml version="1.0" encoding="UTF-8"?>'
    b'<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" '
    b'alphabet="ipa" xml:lang="en-US">'
    b"<lexeme><grapheme>VS</grapheme><alias>Voice Service</alias></lexeme>"
    b"<lexeme><grapheme>Bob</grapheme><phoneme>\xcb\x88t\xc9\x91\xcb\x90m</phoneme></lexeme>"
    b"</lexicon>"
)


async def from_rules(
    client: httpx.AsyncClient, tenant: Tenant, rules: list[dict[str, object]]
) -> httpx.Response:
    return await client.post(
        "/pronunciation-dictionaries/add-from-rules",
        headers=tenant.headers,
        json={"name": "Our words", "rules": rules},
    )


async def from_file(client: httpx.AsyncClient, tenant: Tenant, document: bytes) -> httpx.Response:
    return await client.post(
        "/pronunciation-dictionaries/add-from-file",
        headers=tenant.headers,
        data={"name": "Our words", "description": "from a file"},
        files={"file": ("words.pls", document, "application/pls+xml")},
    )


async def heard(
    client: httpx.AsyncClient, tenant: Tenant, locators: list[dict[str, str]] | None
) -> str:
    """What Whisper hears of TEXT said with `locators` (None: the field left out)."""
    body: dict[str, object] = {"text": TEXT, "voice_id": JOE}
    if locators is not None:
        body["pronunciation_dictionary_locators"] = locators
    said = await client.post(
        "/text-to-speech", params={"output_format": "pcm_16000"}, headers=tenant.headers, json=body
    )
    assert said.status_code == 200, said.text
    answer = await transcribe(client, tenant, wav_bytes(said.content, rate=16_000), language="en")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["text"]).lower()


@pytest.mark.parametrize("made_from", ["rules", "a PLS file"])
async def test_a_dictionary_named_by_a_request_is_heard_and_never_billed(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, made_from: str
) -> None:
    made = await (
        from_rules(client, tenant, RULES)
        if made_from == "rules"
        else from_file(client, tenant, LEXICON)
    )
    assert made.status_code == 201, made.text
    dictionary = made.json()
    assert dictionary["version_rules_num"] == 2
    assert dictionary["latest_version_id"] == dictionary["version_id"]

    said = await heard(client, tenant, [{"pronunciation_dictionary_id": dictionary["id"]}])
    assert "tom" in said and "bob" not in said and "voice service" in said
    speech = [units for endpoint, units in await usage_units(tenants, tenant.org_id)]
    assert len(TEXT) in speech  # the text as written, whatever the rules say


async def test_each_change_is_a_new_version_and_a_request_may_name_an_old_one(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    first = (await from_rules(client, tenant, RULES[:1])).json()
    path = f"/pronunciation-dictionaries/{first['id']}"
    added = await client.post(f"{path}/add-rules", headers=tenant.headers, json={"rules": RULES})
    assert added.status_code == 200, added.text
    assert added.json()["version_rules_num"] == 2  # the alias for VS replaced, Bob added
    second = added.json()["version_id"]
    removed = await client.post(
        f"{path}/remove-rules", headers=tenant.headers, json={"rule_strings": ["VS"]}
    )
    assert removed.json()["version_rules_num"] == 1
    got = (await client.get(path, headers=tenant.headers)).json()
    assert got["latest_version_id"] == removed.json()["version_id"]

    downloaded = await client.get(f"{path}/{second}/download", headers=tenant.headers)
    assert downloaded.headers["content-type"] == "application/pls+xml"
    rules = pls.read(downloaded.content, 10).rules
    assert [rule["string_to_replace"] for rule in rules] == ["VS", "Bob"]

    old = {"pronunciation_dictionary_id": first["id"], "version_id": first["version_id"]}
    said = await heard(client, tenant, [old])
    assert "voice service" in said and "bob" in said  # the first version knew no Bob


async def test_the_words_are_timed_as_written(client: httpx.AsyncClient, tenant: Tenant) -> None:
    dictionary = (await from_rules(client, tenant, RULES)).json()
    response = await client.post(
        "/text-to-speech/with-timestamps",
        headers=tenant.headers,
        json={
            "text": TEXT,
            "voice_id": JOE,
            "pronunciation_dictionary_locators": [
                {"pronunciation_dictionary_id": dictionary["id"]}
            ],
        },
    )
    assert response.status_code == 200, response.text
    alignment = response.json()["alignment"]
    assert "".join(alignment["characters"]) == TEXT
    starts = alignment["character_start_times_seconds"]
    ends = alignment["character_end_times_seconds"]
    vs = TEXT.index("VS")
    # "VS" lasts as long as "Voice Service" is said: longer than "to", two letters too.
    at = TEXT.index(" to ") + 1
    assert ends[vs + 1] - starts[vs] > 2 * (ends[at + 1] - starts[at])


async def test_another_organizations_dictionary_is_not_found(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    dictionary = (await from_rules(client, tenant, RULES)).json()
    other = await tenants.create()
    path = f"/pronunciation-dictionaries/{dictionary['id']}"
    for answer in (
        await client.get(path, headers=other.headers),
        await client.post(f"{path}/add-rules", headers=other.headers, json={"rules": RULES}),
        await client.delete(path, headers=other.headers),
        await client.get(f"{path}/{dictionary['version_id']}/download", headers=other.headers),
        await client.post(
            "/text-to-speech",
            headers=other.headers,
            json={
                "text": TEXT,
                "voice_id": JOE,
                "pronunciation_dictionary_locators": [
                    {"pronunciation_dictionary_id": dictionary["id"]}
                ],
            },
        ),
    ):
        assert_error(answer, 404, "NOT_FOUND")
    listed = (await client.get("/pronunciation-dictionaries", headers=other.headers)).json()
    assert listed == {"pronunciation_dictionaries": [], "next_cursor": None, "has_more": False}
    assert await usage_units(tenants, other.org_id) == []


async def test_listing_archiving_and_deleting(client: httpx.AsyncClient, tenant: Tenant) -> None:
    made = [(await from_rules(client, tenant, RULES)).json()["id"] for _ in range(3)]
    page = (
        await client.get("/pronunciation-dictionaries?page_size=2", headers=tenant.headers)
    ).json()
    assert page["has_more"] and len(page["pronunciation_dictionaries"]) == 2
    rest = (
        await client.get(
            f"/pronunciation-dictionaries?page_size=2&cursor={page['next_cursor']}",
            headers=tenant.headers,
        )
    ).json()
    listed = [
        d["id"] for d in page["pronunciation_dictionaries"] + rest["pronunciation_dictionaries"]
    ]
    assert sorted(listed) == sorted(made) and not rest["has_more"]

    path = f"/pronunciation-dictionaries/{made[0]}"
    archived = await client.patch(
        path, headers=tenant.headers, json={"archived": True, "name": "Old"}
    )
    assert archived.json()["archived_time_unix"] is not None and archived.json()["name"] == "Old"
    refused = await client.post(
        "/text-to-speech",
        headers=tenant.headers,
        json={
            "text": TEXT,
            "voice_id": JOE,
            "pronunciation_dictionary_locators": [{"pronunciation_dictionary_id": made[0]}],
        },
    )
    assert_error(refused, 400, "INVALID_REQUEST")
    assert (await client.delete(path, headers=tenant.headers)).json() == {
        "id": made[0],
        "deleted": True,
    }
    assert_error(await client.get(path, headers=tenant.headers), 404, "NOT_FOUND")


async def test_the_organizations_defaults_apply_where_a_request_names_none(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    dictionary = (await from_rules(client, tenant, RULES)).json()["id"]
    path = f"/pronunciation-dictionaries/{dictionary}"
    made_default = await client.patch(path, headers=tenant.headers, json={"default": True})
    assert made_default.json()["default"] is True, made_default.text

    assert "tom" in await heard(client, tenant, None)
    assert "bob" in await heard(client, tenant, [])  # an empty list: no dictionaries
    stranger = await tenants.create()
    assert "bob" in await heard(client, stranger, None)  # another organization's defaults

    await client.patch(path, headers=tenant.headers, json={"default": False})
    assert "bob" in await heard(client, tenant, None)


async def test_at_most_three_defaults_and_an_archived_dictionary_is_none(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    made = [(await from_rules(client, tenant, RULES)).json()["id"] for _ in range(4)]
    paths = [f"/pronunciation-dictionaries/{dictionary}" for dictionary in made]
    for path in paths[:3]:
        made_default = await client.patch(path, headers=tenant.headers, json={"default": True})
        assert made_default.status_code == 200, made_default.text
    fourth = await client.patch(paths[3], headers=tenant.headers, json={"default": True})
    assert_error(fourth, 400, "INVALID_REQUEST")
    assert "at most 3" in fourth.json()["error"]["message"]

    archived = await client.patch(paths[0], headers=tenant.headers, json={"archived": True})
    assert archived.json()["default"] is False  # archiving takes it out of the defaults
    again = await client.patch(paths[0], headers=tenant.headers, json={"default": True})
    assert_error(again, 400, "INVALID_REQUEST")
    both = await client.patch(
        paths[3], headers=tenant.headers, json={"default": True, "archived": True}
    )
    assert_error(both, 400, "INVALID_REQUEST")
    assert (await client.patch(paths[3], headers=tenant.headers, json={"default": True})).json()[
        "default"
    ]
    listed = (await client.get("/pronunciation-dictionaries", headers=tenant.headers)).json()
    defaults = {d["id"] for d in listed["pronunciation_dictionaries"] if d["default"]}
    assert defaults == set(made[1:])


BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lexicon [<!ENTITY a "lol">'
    b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
    b"<lexicon><lexeme><grapheme>x</grapheme><alias>&c;</alias></lexeme></lexicon>"
)


@pytest.mark.parametrize(
    ("document", "status", "code"),
    [
        (BILLION_LAUGHS, 400, "INVALID_REQUEST"),
        (b"<lexicon>" + b" " * (5 * 1024 * 1024) + b"</lexicon>", 413, "PAYLOAD_TOO_LARGE"),
        (
            b"<lexicon>"
            + b"<lexeme><grapheme>w</grapheme><alias>v</alias></lexeme>" * 15_000
            + b"</lexicon>",
            400,
            "INVALID_REQUEST",
        ),
    ],
)
async def test_files_an_attacker_sends_are_refused_and_cost_nothing(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    document: bytes,
    status: int,
    code: str,
) -> None:
    assert_error(await from_file(client, tenant, document), status, code)
    listed = (await client.get("/pronunciation-dictionaries", headers=tenant.headers)).json()
    assert listed["pronunciation_dictionaries"] == []
    assert await usage_units(tenants, tenant.org_id) == []


async def test_a_hundred_thousand_rules_are_refused_and_cost_nothing(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    rules = [{"type": "alias", "string_to_replace": f"w{n}", "alias": "v"} for n in range(100_000)]
    assert_error(await from_rules(client, tenant, rules), 400, "INVALID_REQUEST")
    listed = (await client.get("/pronunciation-dictionaries", headers=tenant.headers)).json()
    assert listed["pronunciation_dictionaries"] == []
    assert await usage_units(tenants, tenant.org_id) == []


@pytest.mark.parametrize(
    ("locators", "status"),
    [
        ([{"pronunciation_dictionary_id": f"pd_{n}"} for n in range(4)], 400),
        ([{"pronunciation_dictionary_id": "pd_nothing"}], 404),
    ],
)
async def test_bad_locators_are_refused_before_any_speech(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    locators: list[dict[str, str]],
    status: int,
) -> None:
    for route in ("/text-to-speech", "/text-to-speech/stream", "/text-to-speech/with-timestamps"):
        answer = await client.post(
            route,
            headers=tenant.headers,
            json={"text": TEXT, "voice_id": JOE, "pronunciation_dictionary_locators": locators},
        )
        assert answer.status_code == status, answer.text
    assert await usage_units(tenants, tenant.org_id) == []


async def test_rules_the_engines_cannot_say_are_refused_by_name(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    bad = [
        {
            "type": "phoneme",
            "string_to_replace": "Bob",
            "phoneme": "T Q1",
            "alphabet": "cmu-arpabet",
        }
    ]
    answer = await from_rules(client, tenant, bad)
    assert_error(answer, 400, "INVALID_REQUEST")
    assert "'Q1'" in answer.json()["error"]["message"]
