"""The admin CLI contract that operators' scripts rely on."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tests.helpers.api import raised_voice_sample
from tests.helpers.app import running
from tests.helpers.cli import admin_env
from tests.helpers.voices import JOE
from voice_service.app import create_app
from voice_service.cli import app as cli
from voice_service.inference.engines import Engines
from voice_service.settings import Settings
from voice_service.voices.schemas import resemblance_word


@pytest.fixture
def env(settings: Settings) -> dict[str, str]:
    return admin_env(settings)


@pytest.fixture
def admin(env: dict[str, str]):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def run(*args: str, ok: bool = True) -> Any:
        result = runner.invoke(cli, [*args, "--json"], env=env)
        if not ok:
            assert result.exit_code != 0
            return result
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    return run


@pytest.fixture
def admin_text(env: dict[str, str]):  # type: ignore[no-untyped-def]
    """The CLI's text output, as an operator reads it."""
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result.stdout

    return run


def test_orgs_create_makes_an_account(admin) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    assert set(org) >= {"id", "name", "account_id"}
    assert org["name"] == "Acme"
    assert org["id"].startswith("org_") and org["account_id"].startswith("acct_")


def test_orgs_create_in_an_existing_account(admin) -> None:  # type: ignore[no-untyped-def]
    first = admin("orgs", "create", "One")
    second = admin("orgs", "create", "Two", "--account", first["account_id"], "--clone-limit", "3")
    assert second["account_id"] == first["account_id"]
    assert second["id"] != first["id"]


def test_keys_create_shows_the_secret_once_and_list_shows_prefixes(admin) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    key = admin("keys", "create", org["id"], "--name", "ci", "--rate-limit", "500")
    assert set(key) >= {"id", "secret", "prefix", "org_id"}
    assert key["org_id"] == org["id"] and key["secret"].startswith(key["prefix"])
    listed = admin("keys", "list", org["id"])
    assert [k["id"] for k in listed] == [key["id"]]
    assert key["secret"] not in json.dumps(listed)
    assert listed[0]["prefix"] == key["prefix"]


def test_keys_list_shows_each_key_name_and_rate_limit(admin, admin_text) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    named = admin("keys", "create", org["id"], "--name", "ci runner", "--rate-limit", "500")
    unnamed = admin("keys", "create", org["id"])
    admin("keys", "revoke", unnamed["id"])
    lines = admin_text("keys", "list", org["id"]).splitlines()
    assert len(lines) == 2
    assert named["id"] in lines[0] and "active" in lines[0]
    assert "500/min" in lines[0] and lines[0].endswith("ci runner")
    assert unnamed["id"] in lines[1] and "revoked" in lines[1]
    assert "100/min (default)" in lines[1] and lines[1].endswith("(no name)")
    listed = admin("keys", "list", org["id"])
    assert [(k["name"], k["rate_limit"], k["effective_rate_limit"]) for k in listed] == [
        ("ci runner", 500, 500),
        (None, None, 100),
    ]
    assert all(k["org_id"] == org["id"] and k["kind"] == "api" for k in listed)


def test_usage_prints_totals_per_endpoint_for_a_period(admin, admin_text) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    text = admin_text("usage", org["id"], "--from", "2026-01-01", "--to", "2026-01-31")
    assert text.strip() == f"No usage for {org['id']}, 2026-01-01 to 2026-01-31 (UTC days)."
    report = admin("usage", org["id"], "--from", "2026-01-01", "--to", "2026-01-31")
    assert report == {
        "org_id": org["id"],
        "from": "2026-01-01",
        "to": "2026-01-31",
        "usage": [],
        "totals": {},
    }


@pytest.mark.parametrize(
    ("period", "message"),
    [
        (["--from", "2026-02-30"], "'2026-02-30' is not a day written YYYY-MM-DD"),
        (["--to", "2026-1-5"], "'2026-1-5' is not a day written YYYY-MM-DD"),
        (["--from", "2026-03-02", "--to", "2026-03-01"], "starts after it ends"),
        (["--from", "2025-01-01", "--to", "2026-01-02"], "more than 366 days"),
        (["--to", "0001-01-05"], "cannot end on 0001-01-05"),
    ],
)
def test_usage_refuses_the_periods_the_api_refuses(  # type: ignore[no-untyped-def]
    admin, period: list[str], message: str
) -> None:
    org = admin("orgs", "create", "Acme")
    result = admin("usage", org["id"], *period, ok=False)
    assert "--from, --to" in result.stderr and message in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    "rate_limit",
    [
        "\u00b2",  # superscript two: a digit to str.isdigit, which int refuses
        "\u0665\u0660",  # Arabic-Indic 50, which int takes
        "\uff15\uff10",  # fullwidth 50, likewise
        "0",
        "9" * 10,  # past the column's 32 bits
    ],
)
def test_keys_create_takes_a_rate_limit_in_ascii_digits(admin, rate_limit: str) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    result = admin("keys", "create", org["id"], "--rate-limit", rate_limit, ok=False)
    assert "--rate-limit" in result.stderr
    assert admin("keys", "list", org["id"]) == []


def test_keys_create_with_scopes_and_a_monthly_cap(admin, admin_text) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    key = admin(
        "keys",
        "create",
        org["id"],
        "--scopes",
        "usage:read, text-to-speech",
        "--monthly-units",
        "500",
    )
    assert (key["scopes"], key["monthly_units"]) == (["text-to-speech", "usage:read"], 500)
    everything = admin("keys", "create", org["id"], "--name", "ops")
    assert (everything["scopes"], everything["monthly_units"]) == (None, None)
    listed = {k["id"]: (k["scopes"], k["monthly_units"]) for k in admin("keys", "list", org["id"])}
    assert listed == {key["id"]: (key["scopes"], 500), everything["id"]: (None, None)}
    lines = admin_text("keys", "list", org["id"]).splitlines()
    assert "text-to-speech,usage:read  500 units/month" in lines[0]
    assert "all scopes  no cap  ops" in lines[1]


@pytest.mark.parametrize("scopes", ["", "voices:delete", "asr,everything"])
def test_keys_create_refuses_unknown_scopes(admin, scopes: str) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    result = admin("keys", "create", org["id"], "--scopes", scopes, ok=False)
    assert "--scopes" in result.stderr and "usage:read" in result.stderr
    assert admin("keys", "list", org["id"]) == []


def test_orgs_set_cap_and_show(admin, admin_text) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    assert admin("orgs", "set-cap", org["id"], "--monthly-units", "10000")["monthly_units"] == 10000
    assert admin("orgs", "show", org["id"])["monthly_units"] == 10000
    assert "monthly cap      10000" in admin_text("orgs", "show", org["id"])
    assert admin("orgs", "set-cap", org["id"], "--no-cap")["monthly_units"] is None
    admin("orgs", "set-cap", org["id"], ok=False)  # one of the two, not neither
    admin("orgs", "set-cap", org["id"], "--monthly-units", "5", "--no-cap", ok=False)
    admin("orgs", "set-cap", "org_nope", "--no-cap", ok=False)


@pytest.mark.parametrize(
    "args",
    [
        ("orgs", "suspend", "org_nope"),
        ("orgs", "reinstate", "org_nope"),
        ("orgs", "disable", "org_nope", "cloning"),
        ("accounts", "suspend", "acct_nope"),
        ("accounts", "enable", "acct_nope", "asr"),
        ("orgs", "create", "X", "--account", "acct_nope"),
        ("keys", "create", "org_nope"),
        ("keys", "revoke", "key_nope"),
        ("keys", "list", "org_nope"),
        ("usage", "org_nope"),
        ("requests", "org_nope"),
        ("clones", "org_nope"),
    ],
)
def test_unknown_ids_fail_clearly(admin, args: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    result = admin(*args, ok=False)
    unknown = next(arg for arg in args if arg.endswith("_nope"))
    assert "No " in result.stderr and unknown in result.stderr
    assert result.stdout == ""


def test_unknown_service_is_refused(admin) -> None:  # type: ignore[no-untyped-def]
    org = admin("orgs", "create", "Acme")
    admin("orgs", "disable", org["id"], "teleportation", ok=False)


def test_cli_changes_take_effect_over_http(  # type: ignore[no-untyped-def]
    admin, admin_text, settings: Settings, engines: Engines
) -> None:
    org = admin("orgs", "create", "Acme")
    key = admin("keys", "create", org["id"])
    headers = {"Authorization": f"Bearer {key['secret']}"}
    joe = JOE

    async def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
        async with running(create_app(settings, engines)) as client:
            return await client.request(method, path, headers=headers, **kwargs)

    def status(method: str, path: str, **kwargs: Any) -> int:
        return asyncio.run(call(method, path, **kwargs)).status_code

    tts = {"json": {"text": "Hi.", "voice_id": joe}}
    assert status("GET", "/voices") == 200
    admin("orgs", "suspend", org["id"])
    assert status("GET", "/voices") == 403
    admin("orgs", "reinstate", org["id"])
    admin("accounts", "suspend", org["account_id"])
    assert status("GET", "/voices") == 403
    admin("accounts", "reinstate", org["account_id"])
    admin("accounts", "disable", org["account_id"], "text-to-speech")
    refused = asyncio.run(call("POST", "/text-to-speech", **tts))
    assert refused.status_code == 403
    assert "disabled for this account" in refused.json()["error"]["message"]
    admin("accounts", "enable", org["account_id"], "text-to-speech")
    admin("orgs", "disable", org["id"], "text-to-speech")
    refused = asyncio.run(call("POST", "/text-to-speech", **tts))
    assert refused.status_code == 403
    assert "disabled for this organization" in refused.json()["error"]["message"]
    admin("orgs", "enable", org["id"], "text-to-speech")
    response = asyncio.run(call("POST", "/text-to-speech", **tts))
    assert response.status_code == 200

    # Days around today's: the request may have been billed just before a UTC midnight.
    today = datetime.now(UTC).date()
    around = ["--from", str(today - timedelta(days=1)), "--to", str(today + timedelta(days=1))]
    usage = admin("usage", org["id"], *around)
    assert usage["from"] == str(today - timedelta(days=1))
    assert [(u["endpoint"], u["units"], u["requests"]) for u in usage["usage"]] == [
        ("text-to-speech", 3, 1)
    ]
    assert usage["totals"] == {"text-to-speech": 3}
    totals = admin_text("usage", org["id"], *around).split("Totals:\n")[1]
    assert totals.split() == ["text-to-speech", "3", "units", "1", "requests"]
    assert admin("usage", org["id"])["totals"] == {"text-to-speech": 3}  # the last 30 days
    before = admin("usage", org["id"], "--to", str(today - timedelta(days=2)))
    assert before["usage"] == [] and before["totals"] == {}
    requests = admin("requests", org["id"], "--limit", "3")
    assert len(requests) == 3
    assert set(requests[0]) == {
        "request_id",
        "method",
        "path",
        "status",
        "error_code",
        "duration_ms",
        "created_at",
        "units",
        "billed_endpoint",
    }
    assert requests[0]["request_id"] == response.headers["x-request-id"]
    assert [r["status"] for r in requests] == [200, 403, 403]
    # The success's units, as `usage` counts them; the refusals' none.
    assert [(r["units"], r["billed_endpoint"]) for r in requests] == [
        (3, "text-to-speech"),
        (0, None),
        (0, None),
    ]

    admin("keys", "revoke", key["id"])
    assert status("GET", "/voices") == 401


def test_clones_lists_each_clone_with_its_resemblance(  # type: ignore[no-untyped-def]
    admin, admin_text, settings: Settings, engines: Engines, tmp_path: Path
) -> None:
    org = admin("orgs", "create", "Acme")
    key = admin("keys", "create", org["id"])
    assert admin("clones", org["id"]) == []
    assert admin_text("clones", org["id"]) == f"{org['id']} has no cloned voices.\n"

    async def cloned() -> dict[str, Any]:
        async with running(create_app(settings, engines)) as client:
            response = await client.post(
                "/voices/clone",
                headers={"Authorization": f"Bearer {key['secret']}"},
                # A name with an escape sequence that would clear an operator's screen.
                data={"name": "Ann\x1b[2J", "consent": "true"},
                files={"file": ("sample.wav", raised_voice_sample(tmp_path), "audio/wav")},
            )
            assert response.status_code == 201, response.text
            voice: dict[str, Any] = response.json()["voice"]
            return voice

    voice = asyncio.run(cloned())
    (listed,) = admin("clones", org["id"])
    assert listed["id"] == voice["id"] and listed["name"] == "Ann\x1b[2J"
    assert listed["resemblance"] == voice["resemblance"] and 0 <= voice["resemblance"] <= 1
    line = admin_text("clones", org["id"])
    word = resemblance_word(voice["resemblance"])
    assert f"{voice['id']}  Ann\ufffd[2J  resemblance {voice['resemblance']:.2f} ({word})" in line
    assert "\x1b" not in line


@pytest.mark.parametrize(
    "command",
    [[], ["serve"], ["keys", "create"], ["orgs", "suspend"], ["usage"], ["requests"], ["clones"]],
)
def test_help_names_each_flag_plainly(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "--help" in result.output and "<bool>" not in result.output
