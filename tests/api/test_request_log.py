"""Every request leaves one log row, findable by the id the client was given."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select

from tests.helpers.app import Tenant, Tenants
from voice_service.books.requestlog.repository import recent_requests
from voice_service.core.models import RequestLogEntry

pytestmark = pytest.mark.anyio


async def log_row(tenants: Tenants, request_id: str) -> RequestLogEntry | None:
    return await tenants.run(lambda s: s.get(RequestLogEntry, request_id))


async def test_success_is_logged_against_org_and_key(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    response = await client.get("/voices", headers=tenant.headers)
    row = await log_row(tenants, response.headers["x-request-id"])
    assert row is not None
    assert (row.org_id, row.key_id, row.method, row.path, row.status, row.error_code) == (
        tenant.org_id,
        tenant.key_id,
        "GET",
        "/api/v1/voices",
        200,
        None,
    )
    assert row.duration_ms >= 0


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/voices", 401, "INVALID_API_KEY"),
        ("GET", "/missing", 404, "NOT_FOUND"),
        ("DELETE", "/text-to-speech", 405, "INVALID_REQUEST"),
    ],
)
async def test_failures_without_a_key_are_logged_with_no_org(
    client: httpx.AsyncClient, tenants: Tenants, method: str, path: str, status: int, code: str
) -> None:
    response = await client.request(method, path)
    row = await log_row(tenants, response.headers["x-request-id"])
    assert row is not None
    assert (row.org_id, row.status, row.error_code) == (None, status, code)


async def test_rejections_of_a_known_key_are_logged_against_its_org(
    client: httpx.AsyncClient, tenants: Tenants
) -> None:
    tenant = await tenants.create(rate_limit=1)
    await client.get("/voices", headers=tenant.headers)
    limited = await client.get("/voices", headers=tenant.headers)
    invalid = await client.post("/text-to-speech", headers=tenant.headers, json={})
    rows = {
        r.entry.request_id: r.entry
        for r in await tenants.run(lambda s: recent_requests(s, tenant.org_id, 10))
    }
    assert rows[limited.headers["x-request-id"]].error_code == "RATE_LIMITED"
    # Rate limiting comes before validation: the over-limit request is refused as such.
    assert rows[invalid.headers["x-request-id"]].status == 429


async def test_one_row_per_request(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    for _ in range(3):
        await client.get("/voices", headers=tenant.headers)
    rows = await tenants.run(
        lambda s: s.scalars(select(RequestLogEntry).where(RequestLogEntry.org_id == tenant.org_id))
    )
    assert len(list(rows)) == 3


async def test_orgs_see_only_their_own_log(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    other = await tenants.create()
    await client.get("/voices", headers=tenant.headers)
    await client.get("/voices", headers=other.headers)
    mine = await tenants.run(lambda s: recent_requests(s, tenant.org_id, 10))
    assert {r.entry.org_id for r in mine} == {tenant.org_id}


async def test_very_long_paths_are_still_logged(
    client: httpx.AsyncClient, tenants: Tenants
) -> None:
    response = await client.get("/" + "x" * 5000)
    row = await log_row(tenants, response.headers["x-request-id"])
    assert row is not None
    assert row.status == 404 and len(row.path) == 2048
