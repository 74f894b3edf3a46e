"""What a Wyoming listener refuses, and how: Wyoming's `error` event (its code the API's),
a request-log row, nothing billed; what is not an event closes the connection; nothing a
client sends holds the node's memory or a task unbounded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import numpy as np
import pytest
from wyoming.asr import Transcribe
from wyoming.event import async_read_event
from wyoming.info import Describe
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeVoice

from tests.helpers.app import Tenants, make_settings
from tests.helpers.voices import JOE
from tests.helpers.wyoming import (
    IDLE_SECONDS,
    MAX_AUDIO_SECONDS,
    Node,
    audio_events,
    books_of,
    connected,
    new_rows,
    read_until,
    send,
    wyoming_node,
)
from voice_service.core.vocabulary import Scope
from voice_service.inference.engines import Engines
from voice_service.tenancy import service as tenancy

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("served")]

MAIN, REVOKED, SUSPENDED, NARROW, LIMITED, CAPPED, CUT_OFF = range(7)
LONG_TEXT = " ".join(["The weather tomorrow will be sunny with a light breeze."] * 20)


@pytest.fixture(scope="module")
async def node(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, engines: Engines
) -> AsyncIterator[Node]:
    data_dir = tmp_path_factory.mktemp("wyoming-refusals")
    tenants = Tenants(make_settings(data_dir, database_url))
    main = await tenants.create()
    keys = [
        main,
        await tenants.create(),
        await tenants.create(),
        await tenants.add_key(main, scopes=[Scope.SPEECH_TO_TEXT]),
        await tenants.add_key(main, rate_limit=3),
        await tenants.add_key(main, monthly_units=40),
        await tenants.add_key(main),
    ]
    # Twenty requests at once all wait their turn (test_wyoming_operations refuses them).
    queue = {"max_queued_per_capability": 20}
    async with wyoming_node(data_dir, database_url, engines, keys, **queue) as started:
        yield started


async def _refusal(port: int, *events: object) -> dict[str, str]:
    async with connected(port) as client:
        await send(client, *events)  # type: ignore[arg-type]
        answer = await read_until(client, "audio-stop", "info", "transcript")
    assert answer.error is not None, answer.events
    assert not answer.of("audio-chunk")
    return answer.error


async def test_an_unknown_voice(node: Node) -> None:
    before = await books_of(node.tenants, node.tenant.key_id)
    error = await _refusal(node.ports[MAIN], Synthesize("Hi.", SynthesizeVoice("voice_nope")))
    assert error["code"] == "NOT_FOUND" and "voice_nope" in error["text"]
    books = await new_rows(node.tenants, node.tenant.key_id, before)
    (row,) = books.logged
    assert (row.path, row.status, row.error_code) == ("/wyoming/synthesize", 404, "NOT_FOUND")
    assert books.billed == []


async def test_a_revoked_key(node: Node) -> None:
    key = node.keys[REVOKED]
    await node.tenants.run(lambda session: tenancy.revoke_key(session, key.key_id))
    for request in (Describe(), Synthesize("Hi."), Transcribe()):
        error = await _refusal(node.ports[REVOKED], request)
        assert error["code"] == "INVALID_API_KEY", error


async def test_a_key_revoked_mid_stream_ends_it_billed_for_the_audio_sent(node: Node) -> None:
    """The node ends the stream by itself (the client sends nothing more), as the
    WebSockets do: the error event, a row with the error's code, the clause it heard
    billed."""
    key = node.keys[CUT_OFF]
    clause = "The first clause, "
    before = await books_of(node.tenants, key.key_id)
    async with connected(node.ports[CUT_OFF]) as client:
        await send(client, SynthesizeStart(), SynthesizeChunk(clause))
        assert (await read_until(client, "audio-chunk")).error is None
        await node.tenants.run(lambda session: tenancy.revoke_key(session, key.key_id))
        answer = await read_until(client, "audio-stop")
    assert answer.error is not None and answer.error["code"] == "INVALID_API_KEY", answer.events
    assert "revoked" in answer.error["text"]
    books = await new_rows(node.tenants, key.key_id, before)
    (row,) = books.logged
    assert (row.path, row.status, row.error_code) == (
        "/wyoming/synthesize-stream",
        401,
        "INVALID_API_KEY",
    )
    assert [usage.units for usage in books.billed] == [len(clause.rstrip())]


async def test_a_suspended_organization(node: Node) -> None:
    key = node.keys[SUSPENDED]
    await node.tenants.run(
        lambda session: tenancy.set_status(session, "org", key.org_id, tenancy.SUSPENDED)
    )
    error = await _refusal(node.ports[SUSPENDED], Synthesize("Hi."))
    assert error["code"] == "ACCOUNT_SUSPENDED", error


async def test_a_key_without_the_scope(node: Node) -> None:
    async with connected(node.ports[NARROW]) as client:
        await send(client, Describe())
        (info,) = (await read_until(client, "info")).of("info")
    assert info.data["tts"] == [] and len(info.data["asr"]) == 1
    error = await _refusal(node.ports[NARROW], Synthesize("Hi."))
    assert error["code"] == "SERVICE_DISABLED", error


async def test_the_keys_rate_limit(node: Node) -> None:
    async with connected(node.ports[LIMITED]) as client:
        for _ in range(3):
            await send(client, Describe())
            assert (await read_until(client, "info")).error is None
        await send(client, Describe())
        error = (await read_until(client, "info")).error
    assert error is not None and error["code"] == "RATE_LIMITED", error


async def test_a_monthly_cap(node: Node) -> None:
    key = node.keys[CAPPED]
    before = await books_of(node.tenants, key.key_id)
    error = await _refusal(node.ports[CAPPED], Synthesize("x" * 41))
    assert error["code"] == "RATE_LIMITED", error
    async with connected(node.ports[CAPPED]) as client:
        await send(client, SynthesizeStart(), SynthesizeChunk("Twenty characters. "))
        await send(client, SynthesizeChunk("And twenty-five more of them. "))
        answer = await read_until(client, "synthesize-stopped")
    assert answer.error is not None and answer.error["code"] == "RATE_LIMITED", answer.events
    books = await new_rows(node.tenants, key.key_id, before, count=2)
    assert books.billed == []


async def _raw(port: int, data: bytes) -> list[dict[str, object]]:
    """What the node answers to `data` sent as it is, until it closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        answers = []
        async with asyncio.timeout(IDLE_SECONDS * 4):
            while (event := await async_read_event(reader)) is not None:
                answers.append({"type": event.type, **event.data})
        return answers
    finally:
        writer.close()


async def test_a_line_that_is_not_an_event_closes_the_connection(node: Node) -> None:
    for garbage in (b"hello\n", b"[1, 2]\n", b'{"data": {}}\n', b'{"type": "ping", "data": 3}\n'):
        (answer,) = await _raw(node.ports[MAIN], garbage + Describe().event().type.encode())
        assert answer["type"] == "error" and answer["code"] == "INVALID_REQUEST", answer


async def test_a_payload_length_that_lies(node: Node) -> None:
    line = {"type": "audio-chunk", "data": {"rate": 16000, "width": 2, "channels": 1}}
    longer = json.dumps({**line, "payload_length": 640}).encode() + b"\n" + bytes(320)
    (answer,) = await _raw(node.ports[MAIN], longer)  # the rest never comes
    assert answer["code"] == "INVALID_REQUEST" and "640 bytes" in str(answer["text"]), answer
    shorter = json.dumps({**line, "payload_length": 320}).encode() + b"\n" + bytes(640)
    # The chunk is taken (and refused: no transcription is under way), then the rest of
    # its audio reads as a line.
    *_, answer = await _raw(node.ports[MAIN], shorter + b"\n")
    assert answer["code"] == "INVALID_REQUEST" and "Not a Wyoming event" in str(answer["text"])
    huge = json.dumps({**line, "payload_length": 10**12}).encode() + b"\n"
    (answer,) = await _raw(node.ports[MAIN], huge)
    assert "at most" in str(answer["text"]), answer  # refused at once, not read


async def test_a_line_past_the_limit(node: Node) -> None:
    (answer,) = await _raw(node.ports[MAIN], b'{"type": "' + b"x" * 200_000 + b'"}\n')
    assert answer["code"] == "INVALID_REQUEST", answer


async def test_a_client_that_leaves_mid_answer_is_billed_the_audio_it_was_sent(
    node: Node,
) -> None:
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[MAIN]) as client:
        await send(client, Synthesize(LONG_TEXT, SynthesizeVoice(JOE)))
        assert (await read_until(client, "audio-chunk")).error is None
    books = await new_rows(node.tenants, node.tenant.key_id, before)
    (row,) = books.logged
    assert (row.status, row.error_code) == (499, "CLIENT_CLOSED_REQUEST")
    (usage,) = books.billed
    assert 0 < usage.units < len(LONG_TEXT)


async def test_streamed_text_left_without_its_stop_is_billed_the_audio_it_was_sent(
    node: Node,
) -> None:
    """Home Assistant's streamed synthesis, its audio read, the connection closed without
    `synthesize-stop`: what was spoken is billed, and the row says how it ended."""
    sentences = [f"Sentence number {n} is spoken as soon as it ends. " for n in range(8)]
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[MAIN]) as client:
        await send(client, SynthesizeStart(), *(SynthesizeChunk(text) for text in sentences))
        for _ in range(3):
            assert (await read_until(client, "audio-chunk")).error is None
    books = await new_rows(node.tenants, node.tenant.key_id, before)
    (row,) = books.logged
    assert (row.path, row.status, row.error_code) == (
        "/wyoming/synthesize-stream",
        499,
        "CLIENT_CLOSED_REQUEST",
    )
    (usage,) = books.billed
    assert 0 < usage.units <= len("".join(sentences))


async def test_a_client_that_leaves_mid_request_is_billed_only_audio_it_was_sent(
    node: Node,
) -> None:
    """Mid-way through its audio, or through its streamed text: the request is logged as
    ended there (499) once the node sees the connection close; audio in is not billed
    unless transcribed."""
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[MAIN]) as client:
        events = list(audio_events(bytes(2 * 16_000 * 2), 16_000))
        await send(client, Transcribe(), *events[:-1])  # no audio-stop
    async with connected(node.ports[MAIN]) as client:
        await send(client, SynthesizeStart(), SynthesizeChunk("The first clause, "))
        assert (await read_until(client, "audio-chunk")).error is None
    books = await new_rows(node.tenants, node.tenant.key_id, before, count=2)
    assert sorted((row.path, row.status) for row in books.logged) == [
        ("/wyoming/synthesize-stream", 499),
        ("/wyoming/transcribe", 499),
    ]
    (spoken,) = books.billed
    assert spoken.units == len("The first clause,")  # its audio: the space after says nothing


async def test_text_past_the_longest_spoken(node: Node) -> None:
    error = await _refusal(node.ports[MAIN], Synthesize("x " * 2501))
    assert error["code"] == "INVALID_REQUEST" and "5000" in error["text"], error
    async with connected(node.ports[MAIN]) as client:
        await send(client, SynthesizeStart(voice=SynthesizeVoice(JOE)))
        await send(client, *(SynthesizeChunk("Lights off. " * 100) for _ in range(5)))
        answer = await read_until(client, "synthesize-stopped")
    assert answer.error is not None and "5000" in answer.error["text"], answer.error


async def test_audio_past_the_longest_taken(node: Node) -> None:
    before = await books_of(node.tenants, node.tenant.key_id)
    pcm = bytes(2 * 16_000 * (MAX_AUDIO_SECONDS + 1))
    error = await _refusal(node.ports[MAIN], Transcribe(), *audio_events(pcm, 16_000))
    assert error["code"] == "PAYLOAD_TOO_LARGE", error
    books = await new_rows(node.tenants, node.tenant.key_id, before)
    assert [row.status for row in books.logged] == [413] and books.billed == []


async def test_audio_in_a_format_not_taken(node: Node) -> None:
    for rate, width, channels in ((16_000, 3, 1), (4_000, 2, 1), (16_000, 2, 6)):
        events = audio_events(bytes(960), rate, width=width, channels=channels)
        error = await _refusal(node.ports[MAIN], Transcribe(), *events)
        assert error["code"] == "INVALID_REQUEST", error


async def test_twenty_clients_at_once(node: Node) -> None:
    async def one(index: int) -> bytes:
        async with connected(node.ports[MAIN]) as client:
            await send(client, Synthesize(f"Client {index}.", SynthesizeVoice(JOE)))
            answer = await read_until(client, "audio-stop")
        assert answer.error is None, answer.error
        return answer.audio

    before = await books_of(node.tenants, node.tenant.key_id)
    answers = await asyncio.gather(*(one(index) for index in range(20)))
    assert all(len(audio) > 0 for audio in answers)
    books = await new_rows(node.tenants, node.tenant.key_id, before, count=20)
    assert len(books.billed) == 20


async def test_silence_is_transcribed_as_nothing_and_billed(node: Node) -> None:
    pcm = (np.zeros(16_000 * 2)).astype("<i2").tobytes()
    async with connected(node.ports[MAIN]) as client:
        await send(client, Transcribe(), *audio_events(pcm, 16_000))
        answer = await read_until(client, "transcript-stop")
    assert answer.error is None
    (transcript,) = answer.of("transcript")
    assert transcript.data["text"] == ""
