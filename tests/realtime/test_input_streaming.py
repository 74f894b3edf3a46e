"""Text streamed in over ElevenLabs' input-streaming protocol, on a real node.

Ordering is proven from the order of messages: the client sends the rest of its text only
after the first audio message has arrived, so that audio was made from the first clause
alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import av
import httpx
import numpy as np
import numpy.typing as npt
import pytest
import websockets
from bench.wer import word_errors
from websockets.exceptions import InvalidStatus

from tests.helpers.servers import Server, running_server
from tests.helpers.session_messages import SessionMessages
from tests.helpers.voices import JOE
from tests.helpers.waiting import eventually
from voice_service.audio.encode import wav_of
from voice_service.core.ids import catalogue_voice_id

pytestmark = pytest.mark.anyio

PATIENCE = 120.0
FIRST = "Thanks for calling, "
REST = ["I can help ", "you with your ", "order today. ", "What is your ", "order number?"]
SPOKEN = FIRST + "".join(REST)
SPANISH = "El tren al aeropuerto sale del andén que está junto a la estación vieja."
ENGLISH_SAMPLE = (
    "Every morning I walk along the river and watch the boats drift slowly past the old "
    "stone bridge, then I buy bread and go home."
)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("input-streaming"), realtime_idle_seconds="4"
    ) as server:
        yield server


class Messages(SessionMessages):
    async def until_final(self) -> None:
        while not (await self.next()).get("isFinal"):
            pass

    def audio(self) -> bytes:
        return b"".join(base64.b64decode(m["audio"]) for m in self.seen if m.get("audio"))

    def alignment(self) -> tuple[str, list[int], list[int]]:
        chars, starts, durations = "", [], []
        for message in self.seen:
            timing = message.get("alignment")
            if timing:
                chars += "".join(timing["chars"])
                starts += timing["charStartTimesMs"]
                durations += timing["charsDurationsMs"]
        return chars, starts, durations


@asynccontextmanager
async def stream_input(
    node: Server,
    voice_id: str = JOE,
    headers: dict[str, str] | None = None,
    opening: dict[str, Any] | None = None,
    **query: str,
) -> AsyncIterator[Messages]:
    url = node.root.replace("http://", "ws://") + f"/api/v1/text-to-speech/{voice_id}/stream-input"
    if query:
        url += "?" + "&".join(f"{name}={value}" for name, value in query.items())
    auth = headers if headers is not None else {"Authorization": f"Bearer {node.api_key}"}
    async with websockets.connect(url, additional_headers=auth, max_size=None) as ws:
        first = {"text": " ", "generation_config": {"chunk_length_schedule": [50]}}
        await ws.send(json.dumps({**first, **(opening or {})}))
        yield Messages(ws)


def samples_of(pcm16: bytes) -> npt.NDArray[np.float32]:
    return np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768


def text(piece: str, **fields: Any) -> str:
    return json.dumps({"text": piece, "try_trigger_generation": True, **fields})


def billed(node: Server, rid: str) -> list[tuple[str, int]]:
    rows = node.query("SELECT endpoint, units FROM usage_records WHERE request_id = ?", rid)
    return [(row["endpoint"], row["units"]) for row in rows]


def logged_status(node: Server, rid: str) -> int | None:
    rows = node.query("SELECT status FROM request_log WHERE request_id = ?", rid)
    return rows[0]["status"] if rows else None


def heard(node: Server, pcm16k: bytes, language: str = "en") -> str:
    """What the node's own Whisper hears in 16 kHz PCM, told its language."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=16_000, layout="mono")
        frame = av.AudioFrame.from_ndarray(
            np.frombuffer(pcm16k, dtype="<i2").reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = 16_000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    response = httpx.post(
        f"{node.base_url}/speech-to-text",
        headers={"Authorization": f"Bearer {node.api_key}"},
        files={"file": ("speech.wav", buffer.getvalue(), "audio/wav")},
        data={"language": language},
        timeout=PATIENCE,
    )
    assert response.status_code == 200, response.text
    transcript: str = response.json()["text"]
    return transcript


async def test_speech_starts_with_the_first_clause_and_follows_the_text(node: Server) -> None:
    async with stream_input(node, output_format="pcm_16000") as messages:
        await messages.ws.send(text(FIRST))
        first = await messages.next()  # before any more text is sent
        assert first["audio"] and first["isFinal"] is False
        assert "".join(first["alignment"]["chars"]).strip()  # the first clause's characters
        for piece in REST:
            await messages.ws.send(text(piece))
        await messages.ws.send(json.dumps({"text": ""}))
        await messages.until_final()
        rid = messages.request_id
    assert messages.seen[-1] == {"audio": None, "isFinal": True}
    chars, starts, durations = messages.alignment()
    assert chars == SPOKEN  # every character sent, once, in order
    assert starts == sorted(starts)
    audio = messages.audio()
    seconds = len(audio) / 2 / 16_000
    assert starts[-1] + durations[-1] <= seconds * 1000 + 20
    assert word_errors(SPOKEN, heard(node, audio))[0] <= 2
    assert eventually(lambda: logged_status(node, rid)) == 101
    assert billed(node, rid) == [("text-to-speech", len(SPOKEN))]


@pytest.mark.parametrize(
    ("output_format", "demuxer", "codec", "rate"),
    [
        (None, "mp3", "mp3float", 22_050),  # the default: MP3 at the voice's rate
        ("ulaw_8000", "mulaw", "pcm_mulaw", 8_000),
        ("mp3_44100_64", "mp3", "mp3float", 44_100),
    ],
)
async def test_the_audio_is_one_stream_in_the_format_asked(
    node: Server, output_format: str | None, demuxer: str, codec: str, rate: int
) -> None:
    query = {} if output_format is None else {"output_format": output_format}
    async with stream_input(node, **query) as messages:
        for piece in [FIRST, *REST]:
            await messages.ws.send(text(piece))
        await messages.ws.send(json.dumps({"text": ""}))
        await messages.until_final()
    options = {"sample_rate": str(rate), "ch_layout": "mono"} if demuxer == "mulaw" else {}
    with av.open(io.BytesIO(messages.audio()), format=demuxer, options=options) as container:
        stream = container.streams.audio[0]
        frames = list(container.decode(stream))
        assert (stream.codec_context.name, frames[0].sample_rate) == (codec, rate)
        seconds = sum(frame.samples for frame in frames) / rate
    _, starts, durations = messages.alignment()
    assert (starts[-1] + durations[-1]) / 1000 <= seconds + 0.1


async def spoken_seconds(node: Server, opening: dict[str, Any]) -> tuple[float, list[Any]]:
    """Seconds of audio SPOKEN makes in a session opened with `opening`, and any errors."""
    async with stream_input(node, opening=opening, output_format="pcm_16000") as messages:
        await messages.ws.send(text(SPOKEN))
        await messages.ws.send(json.dumps({"text": ""}))
        await messages.until_final()
    errors = [message["error"] for message in messages.seen if "error" in message]
    return len(messages.audio()) / 2 / 16_000, errors


async def test_the_opening_voice_settings_speed_is_the_sessions(node: Server) -> None:
    plain, _ = await spoken_seconds(node, {})
    fast, errors = await spoken_seconds(node, {"voice_settings": {"speed": 2.0, "stability": 1}})
    assert not errors
    assert fast / plain == pytest.approx(0.5, rel=0.1)

    at_own_pace, errors = await spoken_seconds(node, {"voice_settings": {"speed": 9}})
    assert errors == ["invalid_message"]
    assert at_own_pace == pytest.approx(plain, rel=0.02)


async def test_a_flush_speaks_text_that_has_no_clause_end(node: Server) -> None:
    async with stream_input(node) as messages:
        await messages.ws.send(text("Just a few words"))
        await messages.ws.send(text(" more", flush=True))
        flushed = await messages.next()
        assert flushed["audio"]
        assert "".join(flushed["alignment"]["chars"]) == "Just a few words more"
        await messages.ws.send(json.dumps({"text": ""}))
        await messages.until_final()


async def test_bad_messages_get_an_error_and_the_session_goes_on(node: Server) -> None:
    async with stream_input(node) as messages:
        bad_messages = [
            "not json",
            json.dumps({"flush": True}),
            json.dumps([1, 2]),
            "[" * 100_000,  # deeper than any parser goes
            '{"text": "\\ud800 lone. "}',  # a surrogate no engine can say
        ]
        for bad in bad_messages:
            await messages.ws.send(bad)
            assert (await messages.next())["error"] == "invalid_message"
        await messages.ws.send(text("Still here. "))
        assert (await messages.next())["audio"]


async def test_a_client_that_leaves_is_billed_for_the_audio_it_was_sent(node: Server) -> None:
    async with stream_input(node, output_format="pcm_16000") as messages:
        await messages.ws.send(text(FIRST))
        await messages.ws.send(text(REST[0]))  # no clause end yet: never spoken
        # Uncompressed: no audio held back. The clause's trailing space has no audio: it
        # would go out with the next.
        while messages.alignment()[0] != FIRST.rstrip():
            await messages.next()
        rid = messages.request_id
        messages.ws.transport.abort()
    assert eventually(lambda: logged_status(node, rid)) == 101
    assert billed(node, rid) == [("text-to-speech", len(FIRST.rstrip()))]


def synthesized_seconds(node: Server) -> float:
    """The node's own count of seconds of speech made (its /metrics)."""
    text = httpx.get(f"{node.root}/metrics", timeout=30).text
    prefix = 'voice_service_audio_seconds_total{capability="text-to-speech"}'
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


async def test_a_client_that_leaves_after_its_last_text_stops_the_speech(node: Server) -> None:
    long_text = "This sentence is one of many that nobody will hear. " * 40  # over a minute
    before = synthesized_seconds(node)
    async with stream_input(node) as messages:
        await messages.ws.send(text(long_text))
        await messages.ws.send(json.dumps({"text": ""}))
        assert (await messages.next())["audio"]
        rid = messages.request_id
        messages.ws.transport.abort()
    assert eventually(lambda: logged_status(node, rid)) == 101
    # Billed for the characters whose audio was sent, not for the text.
    ((endpoint, units),) = billed(node, rid)
    assert endpoint == "text-to-speech"
    assert len(messages.alignment()[0]) <= units < len(long_text)
    # The session ended with the client, not once all of it was spoken.
    made = synthesized_seconds(node) - before
    assert made < 30, made


async def test_an_idle_session_ends_with_elevenlabs_timeout_error(node: Server) -> None:
    async with stream_input(node) as messages:
        error = await messages.next()
        assert error["error"] == "input_timeout_exceeded"
        with pytest.raises(websockets.ConnectionClosedOK):
            await messages.next()
        rid = messages.request_id
    assert eventually(lambda: logged_status(node, rid)) == 101
    assert billed(node, rid) == []


async def test_messages_that_are_not_text_do_not_keep_a_session_from_going_idle(
    node: Server,
) -> None:
    # The node's idle limit is 4 s; junk keeps coming until the node closes the session.
    async with stream_input(node) as messages:

        async def junk() -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                while True:
                    await messages.ws.send(json.dumps({"flush": True}))
                    await asyncio.sleep(0.2)

        sending = asyncio.create_task(junk())
        closed = await messages.close_code()
        await sending
    assert closed == 1000
    errors = [message["error"] for message in messages.seen]
    assert errors[-1] == "input_timeout_exceeded"
    assert set(errors[:-1]) == {"invalid_message"}


async def test_elevenlabs_clients_key_header_is_taken(node: Server) -> None:
    async with stream_input(node, headers={"xi-api-key": node.api_key}) as messages:
        await messages.ws.send(text("Hello there. "))
        assert (await messages.next())["audio"]


@pytest.mark.parametrize(
    ("voice_id", "query", "status", "code"),
    [
        ("voice_nope", {}, 404, "NOT_FOUND"),
        (JOE, {"output_format": "wav"}, 400, "INVALID_REQUEST"),
        (JOE, {"language_code": "es"}, 400, "INVALID_REQUEST"),  # Joe speaks English
        (JOE, {"language_code": "Spanish"}, 400, "INVALID_REQUEST"),
    ],
)
async def test_bad_upgrades_are_refused_before_upgrading(
    node: Server, voice_id: str, query: dict[str, str], status: int, code: str
) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with stream_input(node, voice_id, **query):
            pass
    response = refused.value.response
    assert response.status_code == status
    assert json.loads(response.body)["error"]["code"] == code


async def test_a_clone_speaks_the_sessions_language_code(node: Server) -> None:
    """A clone made from Kumo's English (so Kumo is its base) says a Spanish session in
    Spanish."""
    auth = {"Authorization": f"Bearer {node.api_key}"}
    async with httpx.AsyncClient(base_url=node.base_url, headers=auth, timeout=PATIENCE) as client:
        sample = await client.post(
            "/text-to-speech",
            params={"output_format": "pcm_16000"},
            json={"text": ENGLISH_SAMPLE, "voice_id": catalogue_voice_id("kokoro:jm_kumo:en")},
        )
        assert sample.status_code == 200, sample.text
        made = await client.post(
            "/voices/clone",
            data={"name": "Kumo's clone", "consent": "true"},
            files={"file": ("sample.wav", wav_of(samples_of(sample.content), 16_000), "audio/wav")},
        )
        assert made.status_code == 201, made.text
    voice_id = made.json()["voice"]["id"]

    query = {"output_format": "pcm_16000", "language_code": "es"}
    async with stream_input(node, voice_id, **query) as messages:
        await messages.ws.send(text(SPANISH))
        await messages.ws.send(json.dumps({"text": ""}))
        await messages.until_final()
    transcript = heard(node, messages.audio(), language="es")
    assert word_errors(SPANISH, transcript)[0] <= 3, transcript


async def test_the_opening_pronunciation_dictionaries_are_the_sessions(node: Server) -> None:
    async with httpx.AsyncClient() as client:
        made = await client.post(
            f"{node.base_url}/pronunciation-dictionaries/add-from-rules",
            headers={"Authorization": f"Bearer {node.api_key}"},
            json={
                "name": "Shop words",
                "rules": [{"type": "alias", "string_to_replace": "order", "alias": "parcel"}],
            },
        )
    assert made.status_code == 201, made.text
    locators = [{"pronunciation_dictionary_id": made.json()["id"]}]
    async with stream_input(
        node, opening={"pronunciation_dictionary_locators": locators}, output_format="pcm_16000"
    ) as messages:
        await messages.ws.send(text(SPOKEN))
        await messages.ws.send(json.dumps({"text": ""}))
        await messages.until_final()
    assert not [message for message in messages.seen if "error" in message]
    assert "".join(messages.alignment()[0]) == SPOKEN  # timed as written
    said = heard(node, messages.audio()).lower()
    assert "parcel" in said and "order" not in said

    missing = [{"pronunciation_dictionary_id": "pd_missing"}]
    _, errors = await spoken_seconds(node, {"pronunciation_dictionary_locators": missing})
    assert errors == ["invalid_message"]

    # An opening that names none: the organization's defaults.
    path = f"{node.base_url}/pronunciation-dictionaries/{made.json()['id']}"
    headers = {"Authorization": f"Bearer {node.api_key}"}
    async with httpx.AsyncClient() as client:
        assert (await client.patch(path, headers=headers, json={"default": True})).is_success
        try:
            async with stream_input(node, opening={}, output_format="pcm_16000") as messages:
                await messages.ws.send(text(SPOKEN))
                await messages.ws.send(json.dumps({"text": ""}))
                await messages.until_final()
        finally:
            await client.patch(path, headers=headers, json={"default": False})
    assert "parcel" in heard(node, messages.audio()).lower()
