"""WebSocket sessions end when their key may no longer open them, and bill only what they
delivered.

A key revoked, or an organization suspended, by the admin CLI (another process, as on
another node) ends the key's open sessions by itself: the protocol's error event, close
1008, one log row with the error's code, billed for what was delivered before. A session
whose provider fails, or whose cap is reached, bills the characters whose audio went out
(live transcription: the audio received, less the turns that failed), and its messages say
what is true. Everything is read from the node: its events, its log row, its usage.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import re
from collections.abc import Iterator

import pytest
import websockets

from tests.helpers.app import Tenant, make_settings
from tests.helpers.cli import admin_env, voice_service
from tests.helpers.faulty_upstream import AUDIO, Answer, FaultyUpstream, faulty_upstream
from tests.helpers.live import LiveServer, serving
from tests.helpers.session_messages import SessionMessages
from tests.helpers.upstreams import providers_file
from tests.helpers.voices import JOE
from voice_service.core.ids import catalogue_voice_id
from voice_service.inference.engines import Engines

pytestmark = pytest.mark.anyio

RATE = 24_000  # the realtime protocol's default pcm16 rate
FAILED = Answer(500, "text/plain", (b"internal error",))
PROVIDER_VOICE = catalogue_voice_id("speakers:alloy")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultyUpstream]:
    with faulty_upstream() as server:
        yield server


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory,
    database_url: str,
    engines: Engines,
    upstream: FaultyUpstream,
) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("honest-sessions")
    toml = f"""
[[provider]]
name = "speakers"
kind = "openai"
base_urls = ["{upstream.root}/v1"]

[provider.speech]
voices = [{{ voice = "alloy", name = "Alloy" }}]

[[provider]]
name = "listeners"
kind = "openai"
base_urls = ["{upstream.root}/v1"]

[provider.transcription]
languages = ["de"]
"""
    path = providers_file(directory / "providers.toml", toml)
    # Idle sessions would end on their own long after any test here has its answer.
    settings = make_settings(
        directory, database_url, providers_file=path, realtime_idle_seconds=300
    )
    with serving(settings, engines) as server:
        yield server


@pytest.fixture
def fresh(upstream: FaultyUpstream) -> Iterator[FaultyUpstream]:
    upstream.reset()
    yield upstream
    upstream.reset()


def connect(node: LiveServer, path: str, tenant: Tenant) -> websockets.connect:
    url = node.root.replace("http://", "ws://") + path
    return websockets.connect(url, additional_headers=tenant.headers, max_size=None)


async def run_cli(node: LiveServer, *args: str) -> None:
    """`voice-service ARGS` on the node's database, as an operator runs it."""
    env = await asyncio.to_thread(admin_env, node.settings)
    done = await asyncio.to_thread(voice_service, *args, cwd=node.settings.data_dir, env=env)
    assert done.returncode == 0, done.stderr


async def ended(node: LiveServer, request_id: str) -> tuple[int, str | None, list[int]]:
    row = await asyncio.to_thread(node.log_row, request_id)
    units = await asyncio.to_thread(node.usage_units, request_id)
    return row.status, row.error_code, units


# -- cut off by the key ---------------------------------------------------------------------


def silence(seconds: float) -> list[str]:
    """pcm16 appends of silence, 100 ms each."""
    piece = base64.b64encode(bytes(RATE // 10 * 2)).decode()
    return [
        json.dumps({"type": "input_audio_buffer.append", "audio": piece})
        for _ in range(round(seconds * 10))
    ]


async def test_a_revoked_key_ends_its_live_transcription_billed_for_the_audio_before(
    node: LiveServer,
) -> None:
    tenant = await asyncio.to_thread(node.tenant)
    async with connect(node, "/v1/realtime?intent=transcription", tenant) as ws:
        events = SessionMessages(ws)
        await events.until(lambda m: m["type"] == "session.created")
        for append in silence(2.5):
            await ws.send(append)
        # Its answer comes after every append before it was taken.
        await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        await events.until(lambda m: m["type"] == "input_audio_buffer.cleared")
        await run_cli(node, "keys", "revoke", tenant.key_id)
        # Nothing more is sent: the node ends the session by itself.
        error = await events.until(lambda m: m["type"] == "error")
        assert error["error"]["code"] == "invalid_api_key"
        assert "revoked" in error["error"]["message"]
        assert await events.close_code() == 1008
    assert await ended(node, events.request_id) == (101, "INVALID_API_KEY", [3])


@pytest.mark.parametrize(
    ("change", "code"),
    [("keys revoke", "invalid_api_key"), ("orgs suspend", "account_suspended")],
)
async def test_a_key_cut_off_ends_its_input_stream_billed_for_the_audio_sent(
    node: LiveServer, change: str, code: str
) -> None:
    tenant = await asyncio.to_thread(node.tenant)
    clause = "Hello there, "
    path = f"/api/v1/text-to-speech/{JOE}/stream-input?output_format=pcm_16000"
    async with connect(node, path, tenant) as ws:
        events = SessionMessages(ws)
        await ws.send(json.dumps({"text": " "}))
        await ws.send(json.dumps({"text": clause}))
        spoken = ""
        # Uncompressed, each message's audio says its characters; the clause's trailing
        # space, which has no audio, goes out with the next audio.
        while spoken != clause.rstrip():
            message = await events.next()
            spoken += "".join(message["alignment"]["chars"])
        target = tenant.key_id if change == "keys revoke" else tenant.org_id
        await run_cli(node, *change.split(), target)
        error = await events.until(lambda m: "error" in m)
        assert error["error"] == code
        assert await events.close_code() == 1008
    status, error_code, units = await ended(node, events.request_id)
    assert (status, error_code, units) == (101, code.upper(), [len(spoken)])


# -- billed for what was delivered ----------------------------------------------------------


async def test_a_provider_failing_mid_stream_bills_the_clauses_whose_audio_went_out(
    node: LiveServer, fresh: FaultyUpstream
) -> None:
    fresh.will(Answer(chunks=(AUDIO,)), FAILED)
    tenant = await asyncio.to_thread(node.tenant)
    first, second = "First clause, ", "second clause. "
    async with connect(node, f"/api/v1/text-to-speech/{PROVIDER_VOICE}/stream-input", tenant) as ws:
        events = SessionMessages(ws)
        await ws.send(json.dumps({"text": " "}))
        await ws.send(json.dumps({"text": first}))
        assert base64.b64decode((await events.next())["audio"]) == AUDIO
        await ws.send(json.dumps({"text": second}))
        error = await events.until(lambda m: "error" in m)
        assert error["error"] == "provider_error"
        assert "not billed" not in error["message"]
        assert error["message"].endswith(f"billed: {len(first)}.")
        assert await events.close_code() == 1011
    assert await ended(node, events.request_id) == (101, "PROVIDER_ERROR", [len(first)])


async def test_a_cap_reached_before_any_audio_bills_nothing(node: LiveServer) -> None:
    tenant = await asyncio.to_thread(node.tenant)
    capped = await asyncio.to_thread(asyncio.run, node.tenants.add_key(tenant, monthly_units=100))
    waiting = "a" * 95  # no clause end and under 120 characters: not spoken yet
    async with connect(node, f"/api/v1/text-to-speech/{JOE}/stream-input", capped) as ws:
        events = SessionMessages(ws)
        await ws.send(json.dumps({"text": " "}))
        await ws.send(json.dumps({"text": waiting}))
        await ws.send(json.dumps({"text": " and ten more"}))
        error = await events.until(lambda m: "error" in m)
        assert error["error"] == "rate_limited"
        assert await events.close_code() == 1000
    assert not any(message.get("audio") for message in events.seen)
    assert await ended(node, events.request_id) == (101, "RATE_LIMITED", [])


async def test_a_failed_live_turn_is_not_billed_and_its_event_says_so(
    node: LiveServer, fresh: FaultyUpstream
) -> None:
    fresh.will(FAILED)  # the German turn goes to the listeners, which fail it
    tenant = await asyncio.to_thread(node.tenant)
    async with connect(node, "/v1/realtime?intent=transcription", tenant) as ws:
        events = SessionMessages(ws)
        await events.until(lambda m: m["type"] == "session.created")
        session = {
            "type": "transcription",
            "audio": {"input": {"transcription": {"language": "de"}, "turn_detection": None}},
        }
        await ws.send(json.dumps({"type": "session.update", "session": session}))
        await events.until(lambda m: m["type"] == "session.updated")
        for append in silence(2.5):
            await ws.send(append)
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        failed = await events.until(
            lambda m: m["type"] == "conversation.item.input_audio_transcription.failed"
        )
        message = failed["error"]["message"]
        assert "not billed and is safe" not in message
        # The turn's audio as the node resampled it: within a few samples of what was sent.
        assert re.search(r"Its 2\.(49\d|500) s of audio are not billed\.$", message), message
        for append in silence(0.4):  # listened to, between turns: billed
            await ws.send(append)
        await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        await events.until(lambda m: m["type"] == "input_audio_buffer.cleared")
    assert await ended(node, events.request_id) == (101, None, [math.ceil(0.4)])
    assert [r.path for r in fresh.requests] == ["/v1/audio/transcriptions"]
