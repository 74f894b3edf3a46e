"""Live transcription's quality on held-out sentences: is a turn's final text what a batch
transcription of the same clip says, and how many words does each get wrong?

Run `python -m bench.live_quality [--languages en,es] [--quick]`. A node is started on a
fresh data dir; each held-out sentence (`bench.heldout_sentences`, which no voice or decoder
was tuned on) is spoken by a voice of its language (`pcm_16000`: Joe, or Kokoro's Kumo as in
`bench.speech_set`), streamed to `/v1/realtime?intent=transcription` at real-time pace in
40 ms pieces between 0.5 s and 1.5 s of silence, and posted to `/v1/audio/transcriptions`.
A turn the VAD cuts at a pause counts by its first part, as a client showing the first
final would. `--source` starts the node from another revision's `src`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import websockets

from bench import procs
from bench.heldout_sentences import HELDOUT_SENTENCES
from bench.realtime import PIECE
from bench.speech_set import KOKORO_LANGUAGES, KOKORO_STYLE
from bench.wer import word_errors
from voice_service.audio.encode import FORMATS, OutputFormat, encode
from voice_service.core.ids import catalogue_voice_id
from voice_service.engines.protocols import Pcm

VOICES = {
    "en": "piper:en_US-joe-medium",
    **{language: f"kokoro:{KOKORO_STYLE}:{language}" for language in KOKORO_LANGUAGES},
}
LEAD, TAIL = 0.5, 1.5  # seconds of silence around the sentence
PATIENCE = 120.0


def _as_sent(pcm16k: bytes) -> bytes:
    """The clip with its silences, as the 24 kHz 16-bit PCM a realtime client sends."""
    speech = np.frombuffer(pcm16k, "<i2")
    lead, tail = np.zeros(round(LEAD * 16_000), "<i2"), np.zeros(round(TAIL * 16_000), "<i2")
    return encode([Pcm(np.concatenate([lead, speech, tail]), 16_000)], FORMATS[OutputFormat.PCM])


async def _live_final(url: str, key: str, data: bytes, language: str) -> str:
    """The first turn's `completed` transcript."""
    headers = {"Authorization": f"Bearer {key}"}
    step = round(48_000 * PIECE)  # bytes of 24 kHz 16-bit audio per piece
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        transcription = {"transcription": {"language": language}}
        session = {"type": "transcription", "audio": {"input": transcription}}
        await ws.send(json.dumps({"type": "session.update", "session": session}))

        async def final() -> str:
            async for raw in ws:
                event = json.loads(raw)
                if event["type"] == "conversation.item.input_audio_transcription.completed":
                    return str(event["transcript"])
            raise RuntimeError("the session closed before a turn was transcribed")

        listener = asyncio.create_task(final())
        started = time.perf_counter()
        for index, start in enumerate(range(0, len(data), step)):
            piece = base64.b64encode(data[start : start + step]).decode()
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": piece}))
            await asyncio.sleep(max(0.0, started + (index + 1) * PIECE - time.perf_counter()))
        return await asyncio.wait_for(listener, PATIENCE)


def measure(root: str, key: str, languages: list[str], count: int | None) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {key}"}
    url = root.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
    turns: list[dict[str, Any]] = []
    with httpx.Client(headers=auth, timeout=PATIENCE) as client:
        for language in languages:
            for text in HELDOUT_SENTENCES[language][:count]:
                spoken = client.post(
                    f"{root}/api/v1/text-to-speech",
                    params={"output_format": "pcm_16000"},
                    json={"text": text, "voice_id": catalogue_voice_id(VOICES[language])},
                )
                spoken.raise_for_status()
                live = asyncio.run(_live_final(url, key, _as_sent(spoken.content), language))
                wav = encode(
                    [Pcm(np.frombuffer(spoken.content, "<i2"), 16_000)], FORMATS[OutputFormat.WAV]
                )
                batch = client.post(
                    f"{root}/v1/audio/transcriptions",
                    files={"file": ("clip.wav", wav, "audio/wav")},
                    data={"model": "whisper-1", "language": language},
                )
                batch.raise_for_status()
                turns.append(
                    {
                        "language": language,
                        "said": text,
                        "live": live,
                        "batch": batch.json()["text"],
                    }
                )
    return {"turns": turns, **summary(turns)}


def summary(turns: list[dict[str, Any]]) -> dict[str, Any]:
    edits = {"live": 0, "batch": 0}
    words = 0
    for turn in turns:
        for side in edits:
            # The held-out sentences write numbers as digits, as Whisper does.
            errors, words_said = word_errors(turn["said"], turn[side], turn["language"])
            edits[side] += errors
        words += words_said
    return {
        "same": sum(turn["live"] == turn["batch"] for turn in turns),
        "count": len(turns),
        "live_wer": edits["live"] / max(words, 1),
        "batch_wer": edits["batch"] / max(words, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--languages", default="en,es", help="comma-separated, of " + ",".join(VOICES)
    )
    parser.add_argument("--quick", action="store_true", help="three sentences per language")
    parser.add_argument(
        "--source", type=Path, help="start the node from this `src` (another revision's)"
    )
    args = parser.parse_args()
    languages = args.languages.split(",")
    unknown = sorted(set(languages) - set(VOICES))
    if unknown:
        parser.error(f"no voice for {unknown}")
    with tempfile.TemporaryDirectory() as folder:
        data_dir = Path(folder)
        server, first = procs.start_service(data_dir, source=args.source)
        try:
            key = procs.create_key(
                data_dir, first["org_id"], rate_limit=10_000_000, source=args.source
            )
            result = measure(server.root, key, languages, 3 if args.quick else None)
        finally:
            server.stop()
    for turn in result["turns"]:
        if turn["live"] != turn["batch"]:
            print(f"{turn['language']}: live  {turn['live']!r}\n    batch {turn['batch']!r}")
    print(
        f"final = batch transcript in {result['same']} of {result['count']} turns; "
        f"WER live {result['live_wer']:.3f}, batch {result['batch_wer']:.3f}"
    )


if __name__ == "__main__":
    main()
