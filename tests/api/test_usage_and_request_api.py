"""GET /usage, GET /requests and GET /requests/{id}: the caller's organization only."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.app import Tenant, Tenants
from tests.helpers.voices import JOE
from voice_service.core.models import RequestLogEntry, UsageRecord, utcnow

pytestmark = pytest.mark.anyio


async def add_usage(
    tenants: Tenants, tenant: Tenant, endpoint: str, units: int, at: datetime
) -> None:
    async def work(session: AsyncSession) -> None:
        session.add(
            UsageRecord(
                request_id=f"req_{at.timestamp():.0f}{endpoint}{units}{tenant.org_id[-6:]}",
                org_id=tenant.org_id,
                key_id=tenant.key_id,
                endpoint=endpoint,
                units=units,
                created_at=at,
            )
        )

    await tenants.run(work)


async def test_usage_counts_a_real_request_under_its_endpoint_and_day(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    voices = (await client.get("/voices", headers=tenant.headers)).json()["voices"]
    spoken = await client.post(
        "/text-to-speech",
        headers=tenant.headers,
        json={"text": "Hi there.", "voice_id": voices[0]["id"]},
    )
    assert spoken.status_code == 200
    body = (await client.get("/usage", headers=tenant.headers)).json()
    today = utcnow().date().isoformat()
    assert body == {
        "usage": [{"date": today, "endpoint": "text-to-speech", "units": 9, "requests": 1}],
        "totals": {"text-to-speech": 9},
    }


async def test_usage_days_are_utc_days_and_bounds_are_inclusive(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    day = date(2026, 3, 10)
    last_second = datetime(2026, 3, 10, 23, 59, 59, 999000, tzinfo=UTC)
    await add_usage(tenants, tenant, "asr", 5, last_second)
    await add_usage(tenants, tenant, "asr", 7, last_second + timedelta(milliseconds=1))
    await add_usage(tenants, tenant, "voices/clone", 1, datetime(2026, 3, 9, tzinfo=UTC))
    response = await client.get(
        "/usage", headers=tenant.headers, params={"from": "2026-03-09", "to": "2026-03-10"}
    )
    assert response.json() == {
        "usage": [
            {"date": "2026-03-09", "endpoint": "voices/clone", "units": 1, "requests": 1},
            {"date": day.isoformat(), "endpoint": "asr", "units": 5, "requests": 1},
        ],
        "totals": {"asr": 5, "voices/clone": 1},
    }
    next_day = await client.get(
        "/usage", headers=tenant.headers, params={"from": "2026-03-11", "to": "2026-03-11"}
    )
    assert next_day.json()["totals"] == {"asr": 7}


async def test_usage_shows_only_the_callers_organization(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    other = await tenants.create()
    await add_usage(tenants, other, "asr", 30, utcnow())
    assert (await client.get("/usage", headers=tenant.headers)).json()["totals"] == {}
    assert (await client.get("/usage", headers=other.headers)).json()["totals"] == {"asr": 30}


async def test_usage_on_the_calendars_first_and_last_days(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    await add_usage(tenants, tenant, "asr", 3, datetime(1, 1, 1, 12, tzinfo=UTC))
    await add_usage(tenants, tenant, "asr", 4, datetime(9999, 12, 31, 12, tzinfo=UTC))
    periods = [("0001-01-01", "0001-01-30", 3), ("9999-12-02", "9999-12-31", 4)]
    for first, last, units in periods:
        params = {"from": first, "to": last}
        response = await client.get("/usage", headers=tenant.headers, params=params)
        assert response.status_code == 200, response.text
        assert response.json()["totals"] == {"asr": units}
    # The default period ending on the last day: the 30 days before it.
    latest = await client.get("/usage", headers=tenant.headers, params={"to": "9999-12-31"})
    assert latest.json()["totals"] == {"asr": 4}


@pytest.mark.parametrize(
    "params",
    [
        {"from": "2026-02-30"},
        {"to": "yesterday"},
        {"to": "0"},  # a Unix timestamp to a lax parser
        {"from": "20260301"},
        {"from": "2026-03-02", "to": "2026-03-01"},
        {"from": "2020-01-01", "to": "2026-01-01"},
        # Days the parser takes, in periods that would reach past the calendar's ends.
        {"to": "0001-01-01"},  # the default 30 days would start before year 1
        {"to": "0001-01-29"},
        {"from": "9999-12-31"},  # and end today, before it starts
    ],
)
async def test_bad_usage_periods_are_400(
    client: httpx.AsyncClient, tenant: Tenant, params: dict[str, str]
) -> None:
    response = await client.get("/usage", headers=tenant.headers, params=params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_REQUEST"


async def add_log_rows(tenants: Tenants, tenant: Tenant, statuses: list[int]) -> list[str]:
    """Rows one second apart, oldest first; returns their ids newest first."""
    start = utcnow() - timedelta(hours=1)
    ids = [f"req_{tenant.org_id[-8:]}{i:04d}" for i in range(len(statuses))]

    async def work(session: AsyncSession) -> None:
        for i, status in enumerate(statuses):
            session.add(
                RequestLogEntry(
                    request_id=ids[i],
                    org_id=tenant.org_id,
                    key_id=tenant.key_id,
                    method="GET",
                    path="/api/v1/voices",
                    status=status,
                    error_code=None if status < 400 else "X",
                    duration_ms=3,
                    created_at=start + timedelta(seconds=i),
                )
            )

    await tenants.run(work)
    return ids[::-1]


async def test_pages_walk_the_whole_log_newest_first(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    expected = await add_log_rows(tenants, tenant, [200] * 7)
    seen: list[str] = []
    before: str | None = None
    while True:
        params = {"limit": "3", **({"before": before} if before else {})}
        body = (await client.get("/requests", headers=tenant.headers, params=params)).json()
        seen += [r["request_id"] for r in body["requests"] if r["path"] == "/api/v1/voices"]
        before = body["next"]
        if before is None:
            break
    # The listing calls themselves are logged too (/api/v1/requests): they are newer.
    assert seen == expected


async def test_status_filter_and_one_request(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    ids = await add_log_rows(tenants, tenant, [200, 404, 503, 429])
    body = (await client.get("/requests", headers=tenant.headers, params={"status": "4xx"})).json()
    assert [r["request_id"] for r in body["requests"]] == [ids[0], ids[2]]
    one = (await client.get(f"/requests/{ids[1]}", headers=tenant.headers)).json()
    assert (one["request_id"], one["status"], one["error_code"]) == (ids[1], 503, "X")
    assert set(one) == {
        "request_id",
        "method",
        "path",
        "status",
        "error_code",
        "duration_ms",
        "created_at",
        "bytes_sent",  # null: not a stream
        "replayed",  # an idempotent retry's stored answer
        "resource_id",  # what it made that outlives it (a transcription job)
        "model",  # the transcription model that heard it: none here
        "units",  # what it was billed: nothing, for a failure
        "billed_endpoint",
    }
    assert one["bytes_sent"] is None and one["replayed"] is False and one["model"] is None
    assert (one["units"], one["billed_endpoint"]) == (0, None)


async def test_another_organizations_request_is_the_same_404_as_an_unknown_one(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    other = await tenants.create()
    [theirs] = await add_log_rows(tenants, other, [200])
    foreign = await client.get(f"/requests/{theirs}", headers=tenant.headers)
    unknown = await client.get("/requests/req_nope", headers=tenant.headers)
    assert foreign.status_code == unknown.status_code == 404

    def without_id(response: httpx.Response) -> dict[str, str]:
        error = dict(response.json()["error"])
        error.pop("request_id")
        error["message"] = error["message"].replace(theirs, "ID").replace("req_nope", "ID")
        return error

    assert without_id(foreign) == without_id(unknown)
    assert (await client.get(f"/requests/{theirs}", headers=other.headers)).status_code == 200
    listed = await client.get("/requests", headers=tenant.headers, params={"before": theirs})
    assert listed.status_code == 400


@pytest.mark.parametrize("params", [{"limit": "0"}, {"limit": "201"}, {"status": "3xx"}])
async def test_bad_listing_parameters_are_400(
    client: httpx.AsyncClient, tenant: Tenant, params: dict[str, str]
) -> None:
    response = await client.get("/requests", headers=tenant.headers, params=params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_REQUEST"


async def test_usage_and_log_need_a_key(client: httpx.AsyncClient) -> None:
    for path in ("/usage", "/requests", "/requests/req_x"):
        assert (await client.get(path)).status_code == 401


async def test_each_request_in_the_log_says_what_it_was_billed(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    text = "Billed per request."
    spoken = await client.post(
        "/text-to-speech", headers=tenant.headers, json={"voice_id": JOE, "text": text}
    )
    refused = await client.post(
        "/text-to-speech", headers=tenant.headers, json={"voice_id": "voice_nope", "text": text}
    )
    assert (spoken.status_code, refused.status_code) == (200, 404)
    listed = (await client.get("/requests", headers=tenant.headers)).json()["requests"]
    by_id = {r["request_id"]: r for r in listed}
    for response, billed in ((spoken, (len(text), "text-to-speech")), (refused, (0, None))):
        request_id = response.headers["x-request-id"]
        one = (await client.get(f"/requests/{request_id}", headers=tenant.headers)).json()
        for row in (one, by_id[request_id]):
            assert (row["units"], row["billed_endpoint"]) == billed
    usage = (await client.get("/usage", headers=tenant.headers)).json()
    assert usage["totals"] == {"text-to-speech": sum(r["units"] for r in listed)}


async def test_usage_by_request_pages_every_billed_request_oldest_first(
    client: httpx.AsyncClient, tenants: Tenants
) -> None:
    tenant = await tenants.create()
    texts = ["One.", "Number two.", "And the third one."]
    ids = []
    for text in texts:
        spoken = await client.post(
            "/text-to-speech", headers=tenant.headers, json={"voice_id": JOE, "text": text}
        )
        assert spoken.status_code == 200
        ids.append(spoken.headers["x-request-id"])
    rows: list[dict[str, object]] = []
    params = {"group_by": "request", "limit": "2"}
    while True:
        body = (await client.get("/usage", headers=tenant.headers, params=params)).json()
        assert body["totals"] == {"text-to-speech": sum(map(len, texts))}  # the whole period
        rows += body["usage"]
        if body["next"] is None:
            break
        params = {**params, "after": body["next"]}
    assert [(r["request_id"], r["units"], r["endpoint"]) for r in rows] == [
        (request_id, len(text), "text-to-speech")
        for request_id, text in zip(ids, texts, strict=True)
    ]
    assert {r["key_id"] for r in rows} == {tenant.key_id} and all(r["voice_id"] for r in rows)
    paged_elsewhere = await client.get(
        "/usage", headers=tenant.headers, params={"group_by": "key", "limit": "2"}
    )
    assert paged_elsewhere.status_code == 400
    unknown = await client.get(
        "/usage", headers=tenant.headers, params={"group_by": "request", "after": "req_nope"}
    )
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "INVALID_REQUEST"
