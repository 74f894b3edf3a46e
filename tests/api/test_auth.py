"""Bearer keys: 401 for anything but a live key, 403 for suspended tenants."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.api import assert_error
from tests.helpers.app import Tenant, Tenants
from voice_service.tenancy import service as tenancy
from voice_service.tenancy.keys import generate_secret

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Bearer not-a-key",
        "Bearer vs_tooShort",
        "Token vs_" + "a" * 40,
    ],
)
async def test_missing_or_malformed_key_is_401(
    client: httpx.AsyncClient, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    assert_error(await client.get("/voices", headers=headers), 401, "INVALID_API_KEY")


async def test_unknown_key_is_401(client: httpx.AsyncClient) -> None:
    headers = {"Authorization": f"Bearer {generate_secret().secret}"}
    assert_error(await client.get("/voices", headers=headers), 401, "INVALID_API_KEY")


async def test_revoked_key_is_401(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    assert (await client.get("/voices", headers=tenant.headers)).status_code == 200
    await tenants.run(lambda s: tenancy.revoke_key(s, tenant.key_id))
    assert_error(await client.get("/voices", headers=tenant.headers), 401, "INVALID_API_KEY")


async def test_other_keys_of_the_org_survive_a_revocation(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    other = await tenants.add_key(tenant)
    await tenants.run(lambda s: tenancy.revoke_key(s, tenant.key_id))
    assert (await client.get("/voices", headers=other.headers)).status_code == 200


@pytest.mark.parametrize("kind", ["org", "account"])
async def test_suspended_tenant_is_403_until_reinstated(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, kind: tenancy.TenantKind
) -> None:
    tenant_id = tenant.org_id if kind == "org" else tenant.account_id
    await tenants.run(lambda s: tenancy.set_status(s, kind, tenant_id, tenancy.SUSPENDED))
    assert_error(await client.get("/voices", headers=tenant.headers), 403, "ACCOUNT_SUSPENDED")
    await tenants.run(lambda s: tenancy.set_status(s, kind, tenant_id, tenancy.ACTIVE))
    assert (await client.get("/voices", headers=tenant.headers)).status_code == 200


async def test_suspending_an_account_suspends_all_its_orgs(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    sibling = await tenants.create(account_id=tenant.account_id)
    unrelated = await tenants.create()
    await tenants.run(
        lambda s: tenancy.set_status(s, "account", tenant.account_id, tenancy.SUSPENDED)
    )
    assert_error(await client.get("/voices", headers=sibling.headers), 403, "ACCOUNT_SUSPENDED")
    assert (await client.get("/voices", headers=unrelated.headers)).status_code == 200


async def test_secrets_are_never_stored_in_clear(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    await client.get("/voices", headers=tenant.headers)
    await client.get("/voices", headers={"Authorization": f"Bearer {tenant.secret}x"})

    async def dump(session: AsyncSession) -> str:
        rows = []
        for table in ("api_keys", "request_log", "usage_records", "organizations", "accounts"):
            result = await session.execute(text(f"SELECT * FROM {table}"))  # noqa: S608
            rows.extend(str(tuple(row)) for row in result)
        return "\n".join(rows)

    stored = await tenants.run(dump)
    body = tenant.secret.removeprefix("vs_")
    assert body not in stored
    assert body[:12] not in stored  # not even a long fragment; the display prefix is short


async def test_key_lookup_is_by_hash(tenants: Tenants, tenant: Tenant) -> None:
    from voice_service.core.models import ApiKey

    key = await tenants.run(lambda s: s.scalar(select(ApiKey).where(ApiKey.id == tenant.key_id)))
    assert key is not None
    assert len(key.secret_hash) == 64
    assert tenant.secret.startswith(key.prefix)
