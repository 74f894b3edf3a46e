"""Scoped keys: every endpoint refuses a key that lacks its scope (403 SERVICE_DISABLED
naming the scope, in the shape of the endpoint's API) and serves one that has it."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.api import assert_error
from tests.helpers.app import Tenant, Tenants
from tests.helpers.voices import JOE
from tests.helpers.wav import silent_wav
from voice_service.core.vocabulary import Scope

pytestmark = pytest.mark.anyio

ROOT = "http://testserver"
WAV = ("a.wav", silent_wav(8000, 16000), "audio/wav")

# method, path under the host, the scope it needs, and request arguments. The bodies are
# incomplete where that is enough: a key with the scope gets past the check to a 400.
ENDPOINTS: list[tuple[str, str, Scope, dict[str, object]]] = [
    ("POST", "/api/v1/text-to-speech", Scope.TEXT_TO_SPEECH, {"json": {"voice_id": JOE}}),
    ("POST", "/api/v1/text-to-speech/stream", Scope.TEXT_TO_SPEECH, {"json": {}}),
    ("POST", "/api/v1/text-to-speech/with-timestamps", Scope.TEXT_TO_SPEECH, {"json": {}}),
    (
        "POST",
        "/api/v1/text-to-speech/with-timestamps/stream",
        Scope.TEXT_TO_SPEECH,
        {"json": {}},
    ),
    ("POST", "/v1/audio/speech", Scope.TEXT_TO_SPEECH, {"json": {}}),
    (
        "POST",
        "/api/v1/speech-to-text",
        Scope.SPEECH_TO_TEXT,
        {"data": {"language": "xx"}, "files": {"file": WAV}},
    ),
    (
        "POST",
        "/v1/audio/transcriptions",
        Scope.SPEECH_TO_TEXT,
        {"data": {"model": "whisper-1", "language": "xx"}, "files": {"file": WAV}},
    ),
    (
        "POST",
        "/v1/audio/translations",
        Scope.SPEECH_TO_TEXT,
        {"data": {"model": "whisper-1", "response_format": "xx"}, "files": {"file": WAV}},
    ),
    ("POST", "/api/v1/asr", Scope.ASR, {"data": {"language": "xx"}, "files": {"file": WAV}}),
    ("GET", "/api/v1/voices", Scope.VOICES_READ, {}),
    ("GET", f"/api/v1/voices/{JOE}", Scope.VOICES_READ, {}),
    (
        "POST",
        "/api/v1/voices/clone",
        Scope.VOICES_WRITE,
        {"data": {"name": "x"}, "files": {"file": WAV}},
    ),
    ("DELETE", "/api/v1/voices/voice_nonexistent", Scope.VOICES_WRITE, {}),
    ("GET", "/api/v1/usage", Scope.USAGE_READ, {}),
    ("GET", "/api/v1/requests", Scope.USAGE_READ, {}),
    ("GET", "/api/v1/requests/req_nonexistent", Scope.USAGE_READ, {}),
]
IDS = [f"{method} {path}" for method, path, _, _ in ENDPOINTS]


async def call(
    client: httpx.AsyncClient, tenant: Tenant, method: str, path: str, args: dict[str, object]
) -> httpx.Response:
    return await client.request(method, ROOT + path, headers=tenant.headers, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(("method", "path", "scope", "args"), ENDPOINTS, ids=IDS)
async def test_a_key_without_the_scope_is_refused_naming_it(
    client: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
    method: str,
    path: str,
    scope: Scope,
    args: dict[str, object],
) -> None:
    others = [other for other in Scope if other != scope]
    message = f"This API key lacks the {scope.value} scope."
    # Every other scope together, and each alone: none of them covers this endpoint.
    for lacking_scopes in [others, *([other] for other in others)]:
        lacking = await tenants.add_key(tenant, scopes=lacking_scopes)
        response = await call(client, lacking, method, path, args)
        assert response.status_code == 403, (lacking_scopes, response.text)
        if path.startswith("/v1/"):  # OpenAI's error shape
            assert response.json()["error"] == {
                "message": message,
                "type": "permission_error",
                "param": None,
                "code": "service_disabled",
            }
        else:
            assert assert_error(response, 403, "SERVICE_DISABLED")["message"] == message

    having = await tenants.add_key(tenant, scopes=[scope])
    served = await call(client, having, method, path, args)
    assert served.status_code != 403, served.text
    assert served.status_code < 500, served.text


async def test_a_key_made_without_scopes_may_do_everything(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    for method, path, _, args in ENDPOINTS:
        response = await call(client, tenant, method, path, args)
        assert response.status_code != 403, (path, response.text)


async def test_models_need_no_scope(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    only_usage = await tenants.add_key(tenant, scopes=[Scope.USAGE_READ])
    response = await client.get(ROOT + "/v1/models", headers=only_usage.headers)
    assert response.status_code == 200
