"""Figure 21: what pronunciation dictionaries and SSML add to a speech request's time.

Three dictionaries of 1,000 rules each (the most a request names, each a realistic size)
rewrite a 1,000-character text, as every chunk of a request is rewritten before an engine
says it. Without dictionaries nothing is rewritten, so all of it is added time. The lexicon
itself is compiled once per set of versions and kept (`pronunciation.service`), so its build
is reported beside, not added. An SSML document of the same length, every element this
service takes in it, is read into its script as each request's is.

SSML must not delay a stream either (issue 54: its first audio within 1.1x of plain text's):
`first_audio` times the native `POST /api/v1/text-to-speech/stream` of the app built in this
process (`create_app` with its lifespan, a SQLite database and a key made as the admin CLI
makes one), called as an ASGI server calls it, to the first body bytes (MP3): a text and the
same words as an SSML document whose break and prosody come later in it, in pairs whose
order alternates, each request read to its end before the next.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from fastapi import FastAPI
from starlette.types import Message

from bench.procs import prepared_install, service_env
from voice_service.app import create_app
from voice_service.core.ids import catalogue_voice_id
from voice_service.engines import ssml
from voice_service.engines.catalog import local_engine
from voice_service.engines.chunking import split_text
from voice_service.engines.pronunciation import Lexicon, Rule
from voice_service.engines.protocols import TextToSpeech
from voice_service.inference.engines import Engines, engine_options
from voice_service.pronunciation.rules import MAX_RULES as RULES_PER_DICTIONARY
from voice_service.settings import Settings

DICTIONARIES = 3
RULES_EACH = 1_000
TEXT_CHARS = 1_000


def _rules() -> list[Rule]:
    """Aliases and phonemes for made-up product names, some of them in the text."""
    rules = []
    for dictionary in range(DICTIONARIES):
        for n in range(RULES_EACH):
            name = f"Product{dictionary}x{n}"
            if n % 2:
                rules.append(Rule(name, alias=f"product {n} of line {dictionary}"))
            else:
                rules.append(Rule(name, phonemes="pɹˈɑːdʌkt", case_sensitive=False))
    return rules


def _text() -> str:
    words: list[str] = []
    n = 0
    while len(" ".join(words)) < TEXT_CHARS:
        words += ["Order", "the", f"Product{n % DICTIONARIES}x{n * 37 % RULES_EACH}", "today."]
        n += 1
    return " ".join(words)[:TEXT_CHARS]


def _rewrite_ms(lexicon: Lexicon, chunks: list[str]) -> float:
    started = time.perf_counter()
    for chunk in chunks:
        lexicon.rewrite(chunk)
    return (time.perf_counter() - started) * 1000


def _worst_rules() -> list[Rule]:
    """Rules of every length up to 200 characters that match inside words too: at every
    place of a text they do not match, each length is tried."""
    return [
        Rule("a " * (n % 100) + "a" * (1 + n % 2), alias="b", word_boundaries=False)
        for n in range(3 * RULES_PER_DICTIONARY)
    ]


def _document() -> str:
    sentence = (
        "<s>Call <say-as interpret-as='telephone'>555-0134</say-as> about "
        "<sub alias='World Wide Web'>WWW</sub> on <say-as interpret-as='date' format='ymd'>"
        "2024-03-05</say-as>,<break time='300ms'/> <prosody rate='fast'>said "
        "<phoneme alphabet='ipa' ph='ˈkuːbərˌneɪtiːz'>Kubernetes</phoneme></prosody>.</s>"
    )
    body = ""
    while len(ssml.parse(f"<speak>{body}{sentence}</speak>", "en").written) <= TEXT_CHARS:
        body += sentence
    return f"<speak><p>{body}</p></speak>"


def _parse_ms(document: str) -> float:
    started = time.perf_counter()
    ssml.parse(document, "en")
    return (time.perf_counter() - started) * 1000


def measure(quick: bool) -> dict[str, Any]:
    rules = _rules()
    started = time.perf_counter()
    lexicon = Lexicon(rules)
    build_ms = (time.perf_counter() - started) * 1000
    chunks = split_text(_text())
    repeats = 20 if quick else 200
    timed = [_rewrite_ms(lexicon, chunks) for _ in range(repeats)]
    replaced = sum(len(lexicon.rewrite(chunk).spans) for chunk in chunks)
    worst = Lexicon(_worst_rules())
    worst_chunks = split_text("b " * (TEXT_CHARS // 2))
    worst_ms = statistics.median(_rewrite_ms(worst, worst_chunks) for _ in range(3))
    document = _document()
    return {
        "ssml_parse_ms": statistics.median(_parse_ms(document) for _ in range(repeats)),
        "ssml_characters": len(ssml.parse(document, "en").written),
        "worst_ms": worst_ms,
        "added_ms": statistics.median(timed),
        "build_ms": build_ms,
        "rules": len(rules),
        "characters": sum(len(chunk) for chunk in chunks),
        "replaced": replaced,
        "repeats": repeats,
    }


# The same words twice; the document's break and prosody come after its first sentence,
# where a stream's first chunk is already said.
PLAIN_TEXT = (
    "The old lighthouse keeper climbed the stairs every evening before the storm. "
    "He lit the lamp, waited a moment, and watched the ships pass slowly in the dark."
)
SSML_TEXT = (
    "<speak><s>The old lighthouse keeper climbed the stairs every evening before the "
    "storm.</s> <s>He lit the lamp, <break time='300ms'/> waited a moment, and <prosody "
    "rate='90%'>watched the ships pass slowly</prosody> in the dark.</s></speak>"
)
# Each engine's English voice, and how many plain/SSML pairs it is timed in (quick, full).
STREAM_VOICES = {"piper": "piper:en_US-joe-medium", "kokoro": "kokoro:jm_kumo:en"}
STREAM_PAIRS = {"piper": (8, 30), "kokoro": (0, 5)}
STREAM_PATH = "/api/v1/text-to-speech/stream"
# Where Kokoro's model is joined once and kept: tts_quality's, so one copy serves both.
ENGINES_DIR = Path(tempfile.gettempdir()) / "voice-service-bench"


def speech_engines(names: tuple[str, ...]) -> Engines:
    """The text-to-speech engines `names`, loaded as a node loads them, and nothing else."""
    options = engine_options(Settings(data_dir=ENGINES_DIR, stt_engines=""))
    speakers = {name: cast(TextToSpeech, local_engine(name).load(options)) for name in names}
    return Engines(speakers=speakers, transcribers=None, cloner=None)


def first_audio(engines: Engines, quick: bool) -> dict[str, Any]:
    """Per engine loaded, the median milliseconds to a stream's first audio bytes for the
    plain text and for the SSML document, and the median of their ratio in each pair."""
    with tempfile.TemporaryDirectory() as data:
        data_dir = Path(data)
        install = prepared_install(data_dir, rate_limit=1_000_000)
        settings = Settings(
            data_dir=data_dir,
            database_url=service_env(data_dir)["VOICE_SERVICE_DATABASE_URL"],
            redis_url=None,
            key_pepper=None,  # the data dir's own, which the key was made with
            stt_engines="",
        )
        app = create_app(settings, engines)
        return asyncio.run(_first_audio(app, install.secret, engines, quick))


async def _first_audio(app: FastAPI, secret: str, engines: Engines, quick: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    async with app.router.lifespan_context(app):
        for engine, voice in STREAM_VOICES.items():
            pairs = STREAM_PAIRS[engine][0 if quick else 1]
            if engine not in engines.speakers or not pairs:
                continue
            bodies = [
                json.dumps({"text": text, "voice_id": catalogue_voice_id(voice)}).encode()
                for text in (PLAIN_TEXT, SSML_TEXT)
            ]
            for body in bodies:  # warm: the route, the voice, the parser
                await _first_audio_ms(app, secret, body)
            times: tuple[list[float], list[float]] = ([], [])
            for n in range(pairs):
                for which in (0, 1) if n % 2 == 0 else (1, 0):
                    times[which].append(await _first_audio_ms(app, secret, bodies[which]))
            # Each pair's ratio: the two were timed side by side, so a load that comes and
            # goes (the machine is shared) moves both.
            ratios = [marked / plain for plain, marked in zip(*times, strict=True)]
            result[engine] = {
                "plain_ms": statistics.median(times[0]),
                "ssml_ms": statistics.median(times[1]),
                "ratio": statistics.median(ratios),
                "pairs": pairs,
            }
    return result


async def _first_audio_ms(app: FastAPI, secret: str, body: bytes) -> float:
    """Milliseconds from the call to the first audio bytes of one streamed request, read to
    its end; the client disconnects only once the response is complete, as a server's
    client does."""
    complete = asyncio.Event()
    request = [{"type": "http.request", "body": body, "more_body": False}]
    first: list[float] = []
    status: list[int] = []

    async def receive() -> Message:
        if request:
            return request.pop()
        await complete.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message["type"] == "http.response.body":
            if message.get("body") and not first:
                first.append(time.perf_counter())
            if not message.get("more_body", False):
                complete.set()

    started = time.perf_counter()
    await app(_scope(secret, len(body)), receive, send)
    complete.set()
    if status != [200] or not first:
        raise RuntimeError(f"{STREAM_PATH} answered {status} without audio")
    return (first[0] - started) * 1000


def _scope(secret: str, length: int) -> dict[str, Any]:
    headers = {
        "host": "bench",
        "authorization": f"Bearer {secret}",
        "content-type": "application/json",
        "content-length": str(length),
    }
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": STREAM_PATH,
        "raw_path": STREAM_PATH.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(name.encode(), value.encode()) for name, value in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
