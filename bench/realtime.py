"""Figure 16: realtime sessions on a running node, timed from the client's side.

Live transcription: a real recording (pocketsphinx-testdata's LibriVox reader) streamed at
real-time pace in 40 ms pieces, then silence; how long after the last sample of speech was
sent the turn's final text arrives, and how long after the first sample of speech the first
delta does; one session, then four at once. The node's own share of the final: its time
after where the session's VAD says the speech ended, less the silence the final waits for
(`FINAL_TAIL`) and one batch decode of the same turn (`/speech-to-text` on the idle node, in
the same run). Input streaming:
how long after the first clause is sent its first audio arrives.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import statistics
import time
from typing import Any

import httpx
import numpy as np
import websockets

from bench.recordings import read_recording
from voice_service.audio.encode import FORMATS, OutputFormat, encode, wav_of
from voice_service.audio.vad import RATE, ServerVad
from voice_service.engines.protocols import Pcm
from voice_service.realtime.transcription import FINAL_TAIL

RECORDING = "librivox/sense_and_sensibility_01_austen_64kb-0870.wav"  # 7.1 s
QUICK_RECORDING = "librivox/sense_and_sensibility_01_austen_64kb-0880.wav"  # 3.0 s
PIECE = 0.04  # seconds per append
LEAD = 0.5  # seconds of silence before the speech
TAIL = 2.0  # and after it: the turn ends after VAD's 500 ms of it
FIRST_CLAUSE = "Thanks for calling, "
REST = "how can I help you with your order today?"
PATIENCE = 120.0


def _pcm24k(audio: np.ndarray[Any, Any]) -> bytes:
    pcm = Pcm(np.round(audio * 32767).astype(np.int16), 16_000)
    return encode([pcm], FORMATS[OutputFormat.PCM])


async def live_session(url: str, key: str, recording: str) -> dict[str, float]:
    """Seconds from the end of speech to the final text (from the recording's end, and
    from where the session's VAD says the speech ended), and from its start to the first
    delta (none: inf), for one session."""
    speech = read_recording(recording)
    lead, tail = (
        np.zeros(round(LEAD * 16_000), np.float32),
        np.zeros(round(TAIL * 16_000), np.float32),
    )
    data = _pcm24k(np.concatenate([lead, speech, tail]))
    step = round(48_000 * PIECE)
    speech_from, speech_to = round(LEAD * 48_000), round((LEAD + speech.size / 16_000) * 48_000)
    marks: dict[str, float] = {}
    sent: list[float] = []  # when each piece was sent
    headers = {"Authorization": f"Bearer {key}"}
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        update = {"transcription": {"language": "en"}}
        session = {"type": "transcription", "audio": {"input": update}}
        await ws.send(json.dumps({"type": "session.update", "session": session}))

        async def listen() -> None:
            async for raw in ws:
                event = json.loads(raw)
                kind = event["type"]
                if kind.endswith("transcription.delta") and "delta" not in marks:
                    marks["delta"] = time.perf_counter()
                elif kind == "input_audio_buffer.speech_stopped":
                    marks["stopped_ms"] = event["audio_end_ms"]
                elif kind.endswith("transcription.completed"):
                    marks["completed"] = time.perf_counter()
                    return

        listener = asyncio.create_task(listen())
        started = time.perf_counter()
        for index, start in enumerate(range(0, len(data), step)):
            if start <= speech_from < start + step:
                marks["speech_start"] = time.perf_counter()
            if start < speech_to <= start + step:
                marks["speech_end"] = time.perf_counter()
            await ws.send(
                json.dumps(
                    {
                        "type": "input_audio_buffer.append",
                        "audio": base64.b64encode(data[start : start + step]).decode(),
                    }
                )
            )
            sent.append(time.perf_counter())
            # Real-time pace, kept against drift.
            await asyncio.sleep(max(0.0, started + (index + 1) * PIECE - time.perf_counter()))
        await asyncio.wait_for(listener, PATIENCE)
    # The VAD stops a turn once its silence has lasted silence_duration_ms: the speech
    # ended that long before, in the piece sent last before then.
    silence_ms = ServerVad().silence_duration_ms
    ended = (marks["stopped_ms"] - silence_ms) / 1000
    return {
        "final_after_speech_s": marks["completed"] - marks["speech_end"],
        "final_after_vad_end_s": marks["completed"] - sent[math.ceil(ended / PIECE) - 1],
        "first_delta_after_start_s": marks.get("delta", float("inf")) - marks["speech_start"],
    }


async def batch_decode(root: str, key: str, recording: str) -> float:
    """Seconds of one `/speech-to-text` request for the turn a live session commits: the
    recording with the VAD's padding before it and the final's tail after it."""
    speech = read_recording(recording)
    padding = np.zeros(ServerVad().prefix_padding_ms * RATE // 1000, np.float32)
    turn = wav_of(np.concatenate([padding, speech, np.zeros(FINAL_TAIL, np.float32)]), RATE)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as client:
        started = time.perf_counter()
        response = await client.post(
            f"{root}/api/v1/speech-to-text",
            files={"file": ("turn.wav", turn, "audio/wav")},
            data={"language": "en"},
            timeout=PATIENCE,
        )
        response.raise_for_status()
        return time.perf_counter() - started


async def _first_audio(url: str, key: str) -> float:
    """Seconds from sending the first complete clause to its first audio."""
    headers = {"Authorization": f"Bearer {key}"}
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        await ws.send(json.dumps({"text": " "}))
        sent = time.perf_counter()
        await ws.send(json.dumps({"text": FIRST_CLAUSE, "try_trigger_generation": True}))
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), PATIENCE))
            if message.get("audio"):
                first = time.perf_counter() - sent
                break
        await ws.send(json.dumps({"text": REST}))
        await ws.send(json.dumps({"text": ""}))
        async for raw in ws:
            if json.loads(raw).get("isFinal"):
                break
    return first


def measure(root: str, key: str, voice_id: str, quick: bool, repeats: int) -> dict[str, Any]:
    """What figure 16 reports, measured against the node at `root`."""
    speak = root.replace("http://", "ws://") + f"/api/v1/text-to-speech/{voice_id}/stream-input"

    async def run() -> dict[str, Any]:
        if not quick:
            await _first_audio(speak, key)  # warm the path
        turns = await live_turns(root, key, quick, repeats)
        first_audio = [await _first_audio(speak, key) for _ in range(1 if quick else 3 * repeats)]
        return turns | {"first_audio_s": first_audio}

    return asyncio.run(run())


async def live_turns(root: str, key: str, quick: bool, repeats: int) -> dict[str, Any]:
    """Live sessions alone and four at once, and batch decodes of the same turn, against
    the node at `root`."""
    live = root.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
    recording = QUICK_RECORDING if quick else RECORDING
    if not quick:
        await live_session(live, key, QUICK_RECORDING)  # warm the path
    alone = [await live_session(live, key, recording) for _ in range(repeats)]
    batch = [await batch_decode(root, key, recording) for _ in range(max(3, repeats))]
    together = [
        result
        for _ in range(1 if quick else repeats)
        for result in await asyncio.gather(*(live_session(live, key, recording) for _ in range(4)))
    ]
    return {"alone": alone, "batch_decode_s": batch, "four": together}


def summary(results: dict[str, Any]) -> dict[str, float]:
    first_audio_ms = statistics.median(results["first_audio_s"]) * 1000
    live = live_summary(results["alone"], results["four"], results["batch_decode_s"])
    return live | {"first_audio_p50_ms": first_audio_ms}


def live_summary(
    alone: list[dict[str, float]], four: list[dict[str, float]], batch_decode_s: list[float]
) -> dict[str, float]:
    """Live transcription's figures from sessions alone and four at once, and the batch
    decodes of the same turn."""

    def median(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(row[key] for row in rows)

    four_final = sorted(row["final_after_speech_s"] for row in four)
    decode = statistics.median(batch_decode_s)
    overhead = sorted(row["final_after_vad_end_s"] - FINAL_TAIL / RATE - decode for row in alone)
    return {
        "overhead_p50_ms": statistics.median(overhead) * 1000,
        "overhead_p95_ms": _p95(overhead) * 1000,
        "batch_decode_ms": decode * 1000,
        "final_p50_ms": median(alone, "final_after_speech_s") * 1000,
        "first_delta_p50_ms": median(alone, "first_delta_after_start_s") * 1000,
        "four_final_p50_ms": statistics.median(four_final) * 1000,
        "four_final_p95_ms": _p95(four_final) * 1000,
        "four_first_delta_p50_ms": median(four, "first_delta_after_start_s") * 1000,
    }


def _p95(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
