"""Service configuration, read from `VOICE_SERVICE_*` environment variables (or a `.env`)."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from voice_service.core.vocabulary import Capability
from voice_service.engines.catalog import engine_names, engines_help, parse_engine_list
from voice_service.models.catalogue import names_of

# What WHISPER_MODELS calls the model in WHISPER_MODEL_DIR.
CUSTOM_WHISPER = "custom"

_KEY_ID = re.compile(r"key_[0-9a-f]{24}")  # as core.ids.new_id makes them


def _tts_engines(value: str) -> str:
    return ",".join(parse_engine_list(value, Capability.TEXT_TO_SPEECH))


def _stt_engines(value: str) -> str:
    return ",".join(parse_engine_list(value, Capability.SPEECH_TO_TEXT))


def _names(value: str) -> tuple[str, ...]:
    """A comma-separated list's names, each once, in order."""
    return tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))


def _whisper_models(value: str) -> str:
    names = _names(value)
    known = names_of("whisper")
    unknown = [name for name in names if name not in (*known, CUSTOM_WHISPER)]
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)}: not a Whisper model of the catalogue; name any of "
            f"{', '.join(known)} (pulled with `voice-service models pull`), or "
            f"{CUSTOM_WHISPER} for WHISPER_MODEL_DIR, comma-separated, the default first"
        )
    return ",".join(names)


def _piper_voices(value: str) -> str:
    names = _names(value)
    known = names_of("piper")
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)}: not a Piper voice of the catalogue; name any of "
            f"{', '.join(known)} (pulled with `voice-service models pull`), comma-separated"
        )
    return ",".join(names)


def _empty_as_none(value: str | None) -> str | None:
    return value or None  # an empty variable means the default, as unset


def _sample_store_url(value: str | None) -> str | None:
    if not value:
        return None  # an empty variable means the default, as unset
    url = urlsplit(value)
    if url.scheme != "s3" or not url.netloc or url.query or url.fragment:
        raise ValueError(
            f"{value!r} is not s3://bucket/prefix; unset it to keep samples in the database"
        )
    return value


def parse_hosts(value: str) -> frozenset[tuple[str, int | None]]:
    """`host` or `host:port` entries, comma-separated (`[::1]:8080` for IPv6), as
    (lower-cased host, port or None); raises ValueError naming a bad entry."""
    hosts = set()
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        parsed = urlsplit(f"//{entry}")
        try:
            port = parsed.port
        except ValueError:
            raise ValueError(f"{entry!r}: not host or host:port") from None
        if not parsed.hostname or parsed.path or parsed.username or parsed.query:
            raise ValueError(f"{entry!r}: not host or host:port")
        hosts.add((parsed.hostname.lower(), port))
    return frozenset(hosts)


def parse_schedule(value: str) -> tuple[int, ...]:
    """Whole seconds, comma-separated, each at least 1."""
    try:
        seconds = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{value!r}: whole seconds, comma-separated") from None
    if not seconds or min(seconds) < 1:
        raise ValueError(f"{value!r}: whole seconds, comma-separated, each at least 1")
    return seconds


@dataclass(frozen=True, slots=True)
class WyomingBinding:
    """A Wyoming listener: where it listens, and the API key whose requests it makes."""

    host: str
    port: int
    key_id: str

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_wyoming(value: str) -> tuple[WyomingBinding, ...]:
    """`[HOST:]PORT=KEY_ID` entries, comma-separated (HOST 127.0.0.1 when left out,
    `[::1]:PORT` for IPv6); raises ValueError naming a bad entry."""
    bindings = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        where, _, key_id = entry.partition("=")
        if ":" not in where:
            where = f"127.0.0.1:{where}"
        parsed = urlsplit(f"//{where.strip()}")
        try:
            port = parsed.port
        except ValueError:
            port = None
        key_id = key_id.strip()
        if port is None or not parsed.hostname or parsed.path or not _KEY_ID.fullmatch(key_id):
            raise ValueError(f"{entry!r}: not [HOST:]PORT=KEY_ID (KEY_ID: key_...)")
        bindings.append(WyomingBinding(parsed.hostname, port, key_id))
    ports = [(binding.host, binding.port) for binding in bindings if binding.port != 0]
    if len(set(ports)) != len(ports):
        raise ValueError(f"{value!r}: two listeners on one address")
    return tuple(bindings)


def _wyoming(value: str) -> str:
    parse_wyoming(value)
    return value


def _schedule(value: str) -> str:
    parse_schedule(value)
    return value


def _proxy_addresses(value: str) -> str:
    for item in value.split(","):
        if item.strip():
            try:
                ipaddress.ip_network(item.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"{item.strip()!r} is not an IP address or network (e.g. 10.0.0.5, "
                    "10.0.0.0/24, ::1)"
                ) from None
    return value


def _host_list(value: str) -> str:
    parse_hosts(value)
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VOICE_SERVICE_", env_file=".env", extra="ignore")

    data_dir: Path = Field(
        Path("./data"),
        description="The SQLite database, the joined model, each process's scratch files.",
    )
    sample_store: Annotated[str | None, AfterValidator(_sample_store_url)] = Field(
        None,
        description="Where clone samples live: unset for the database, or s3://bucket/prefix "
        "for an S3-compatible store, reached through boto3's standard environment "
        "(AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION).",
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy async URL, e.g. postgresql+asyncpg://user@host/db. "
        "Default: SQLite file voice-service.db in the data dir.",
    )
    redis_url: str | None = Field(
        None,
        description="redis:// URL for shared rate limits. Required when several processes serve.",
    )
    key_pepper: str | None = Field(
        None,
        description="Secret mixed into API key hashes. Default: generated once into the data "
        "dir. Set the same value on every node of a cluster.",
    )
    default_rate_limit: int = Field(100, ge=1, description="Requests per minute per API key.")
    max_key_rate_limit: int | None = Field(
        None,
        ge=1,
        description="Highest rate limit a customer may give a key in the console "
        "(default: DEFAULT_RATE_LIMIT).",
    )
    console_session_hours: float = Field(
        12.0, gt=0, description="A console sign-in lasts this long; then sign in again."
    )
    default_clone_limit: int = Field(10, ge=0, description="Cloned voices per organization.")
    pool_size: int = Field(
        default_factory=lambda: os.cpu_count() or 1,
        ge=1,
        description="Inference worker threads (default: CPU cores).",
    )
    queue_timeout_seconds: float = Field(
        120.0, gt=0, description="How long a request waits for a free inference worker."
    )
    inference_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="Every inference may run this long, plus the next setting's share.",
    )
    inference_timeout_per_audio_second: float = Field(
        2.0,
        ge=0,
        description="Seconds an inference may add for each second of audio it transcribes "
        "or speaks; past its deadline it stops with 502 and frees its worker.",
    )
    tts_engines: Annotated[str, AfterValidator(_tts_engines)] = Field(
        ",".join(engine_names(Capability.TEXT_TO_SPEECH)),
        description="Text-to-speech engines this node loads, comma-separated, best first; "
        "empty for none (speech from providers only): "
        + engines_help(Capability.TEXT_TO_SPEECH)
        + ".",
    )
    stt_engines: Annotated[str, AfterValidator(_stt_engines)] = Field(
        ",".join(engine_names(Capability.SPEECH_TO_TEXT)),
        description="Speech-to-text engine this node loads; empty for none (transcription "
        "by providers only): " + engines_help(Capability.SPEECH_TO_TEXT) + ".",
    )
    whisper_device: Literal["cpu", "cuda", "auto"] = Field(
        "cpu",
        description="Where the local Whisper runs: cpu, cuda (an NVIDIA GPU; the node "
        "stops if CTranslate2 finds none), or auto (cuda when one is found, else cpu).",
    )
    whisper_compute_type: Annotated[str | None, AfterValidator(_empty_as_none)] = Field(
        None,
        description="CTranslate2 compute type of the local Whisper. Default: int8 on the "
        "CPU, float16 on CUDA (int8_float16 halves GPU memory again).",
    )
    providers_file: Annotated[Path | None, BeforeValidator(_empty_as_none)] = Field(
        None,
        description="A TOML file of upstream inference servers (OpenAI-compatible, "
        "ElevenLabs) for speech, transcription and cloning; see Scaling inference.",
    )
    piper_voices_dir: Path | None = Field(
        None, description="Extra Piper voices (*.onnx + *.onnx.json) to add to the catalogue."
    )
    piper_voices: Annotated[str, AfterValidator(_piper_voices)] = Field(
        "",
        description="Piper voices of the models catalogue this node speaks with besides the "
        "packaged one, comma-separated; each must be pulled (`voice-service models pull "
        "NAME`). Each joins GET /voices with its language.",
    )
    whisper_model_dir: Path | None = Field(
        None,
        description="A CTranslate2 Whisper model you converted yourself: WHISPER_MODELS "
        f"calls it {CUSTOM_WHISPER}, and it is the default model when WHISPER_MODELS is unset.",
    )
    whisper_models: Annotated[str, AfterValidator(_whisper_models)] = Field(
        "",
        description="The Whisper models this node offers, comma-separated, the default first; "
        "a request chooses another by `model` (`model_id` on the native routes). Each must "
        f"be pulled (`voice-service models pull NAME`) but base, which is packaged; "
        f"{CUSTOM_WHISPER} is WHISPER_MODEL_DIR's. Default: {CUSTOM_WHISPER} when "
        "WHISPER_MODEL_DIR is set, else base.",
    )
    model_memory_mb: int = Field(
        4096,
        ge=1,
        description="How much of its speech-to-text models a node holds loaded at once, "
        "counted by their files' size in MB: loading another unloads the least recently used "
        "idle one first (a request that finds every one in use is answered 502 with "
        "Retry-After).",
    )
    model_idle_seconds: float = Field(
        600.0,
        gt=0,
        description="A speech-to-text model other than the default that no request has used "
        "for this long is unloaded.",
    )
    models_dir: Annotated[Path | None, BeforeValidator(_empty_as_none)] = Field(
        None,
        description="Where `voice-service models pull` keeps what it pulls (KIND/NAME/ "
        "below it). Default: models/ in the data dir.",
    )
    speaker_model: Annotated[Path | None, BeforeValidator(_empty_as_none)] = Field(
        None,
        description="An ONNX speaker model in sherpa-onnx's layout (3D-Speaker's CAM++, say) "
        "that tells diarized speakers and known speakers apart instead of the packaged "
        "d-vector encoder.",
    )
    speaker_model_threshold: float = Field(
        0.35,
        gt=0,
        lt=2,
        description="Average cosine distance beyond which SPEAKER_MODEL's clusters are two "
        "people (the default is CAM++'s).",
    )
    speaker_model_known_similarity: float = Field(
        0.65,
        gt=-1,
        lt=1,
        description="Cosine similarity above which a known speaker's reference names a "
        "speaker heard with SPEAKER_MODEL (the default is CAM++'s).",
    )
    max_audio_seconds: float = Field(
        1800.0, gt=0, description="Longest decoded audio accepted for transcription."
    )
    max_upload_bytes: int = Field(
        25 * 1024 * 1024, ge=1, description="Largest audio file accepted (25 MiB)."
    )
    outbound_allowed_hosts: Annotated[str, AfterValidator(_host_list)] = Field(
        "",
        description="Hosts the service may reach although they are private, loopback or "
        "link-local (host or host:port, comma-separated), and over http: webhook receivers "
        "and audio URLs inside your network. Others must be public https.",
    )
    webhook_retry_seconds: Annotated[str, AfterValidator(_schedule)] = Field(
        "5,300,1800,7200,18000,36000,36000",
        description="Waits before each retry of a webhook delivery that failed (a non-2xx "
        "answer, or none within WEBHOOK_TIMEOUT_SECONDS), comma-separated: by default 8 "
        "attempts over 27 h.",
    )
    webhook_timeout_seconds: float = Field(
        15.0,
        gt=0,
        le=30,
        description="The most one webhook delivery attempt may take, from connecting to the "
        "receiver's answer; a slower receiver's attempt is recorded as a timeout and retried.",
    )
    job_max_upload_bytes: int = Field(
        1024**3, ge=1, description="Largest audio file a transcription job accepts (1 GiB)."
    )
    job_max_audio_seconds: float = Field(
        14_400.0, gt=0, description="Longest decoded audio a transcription job accepts (4 h)."
    )
    job_fetch_timeout_seconds: float = Field(
        600.0,
        gt=0,
        description="Longest a transcription job's audio may take to download from the URL "
        "it names; then 400.",
    )
    job_workers: int = Field(
        1,
        ge=0,
        description="Transcription jobs this node's process runs at once (0: none; the "
        "other nodes run them). Their pieces run below every request in the inference pool.",
    )
    job_lease_seconds: int = Field(
        60,
        ge=2,
        description="A job whose node stops reporting on it for this long (killed, or cut "
        "off from the database) is taken over by another node, or by this one once it is back.",
    )
    job_result_days: float = Field(
        30.0,
        gt=0,
        description="Days a finished job's transcript is kept; then the job is deleted.",
    )
    stitching_minutes: int = Field(
        120,
        ge=0,
        le=1440,
        description="Minutes the start and end of each speech request's text are kept so that "
        "a later request may name it in previous_request_ids or next_request_ids (ElevenLabs' "
        "request stitching); 0 keeps none, and those fields are refused.",
    )
    mp3_bitrate: int = Field(64_000, ge=64_000, description="MP3 bitrate of synthesized speech.")
    header_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="A request's headers must be complete this long after its first byte "
        "(after the connection opened, for a new connection); then 408 and close.",
    )
    body_timeout_seconds: float = Field(
        30.0, gt=0, description="Longest wait for the next chunk of a request body; then 408."
    )
    forwarded_allow_ips: Annotated[str, AfterValidator(_proxy_addresses)] = Field(
        "127.0.0.1",
        description="The reverse proxies in front (IP addresses or networks, comma-separated) "
        "whose X-Forwarded-For and X-Forwarded-Proto the node believes: the client's address "
        "(sign-in limits, the audit log, the request log) is then the one the proxy saw. A "
        "request from any other address is its peer's, whatever it says. Empty: none.",
    )
    send_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="A client that takes no byte of its answer for this long is cut off; a "
        "stream is then logged 499 with the bytes it sent, and not billed.",
    )
    max_realtime_sessions_per_key: int = Field(
        10,
        ge=1,
        description="Realtime transcription sessions one key may have open at once, on all "
        "nodes together; one more is refused (429) before the upgrade.",
    )
    max_realtime_seconds: float = Field(
        3600.0,
        gt=0,
        description="A realtime session open this long is closed, with an error event saying so.",
    )
    realtime_idle_seconds: float = Field(
        60.0,
        gt=0,
        description="A WebSocket session whose client sends no audio (live transcription) or "
        "text (input streaming) for this long, while the node is not working for it, is "
        "closed, with an error event saying so; other messages do not count.",
    )
    max_connections: int = Field(
        1000,
        ge=1,
        description="Open connections per node (split evenly among --workers processes); "
        "connections beyond it are closed at once.",
    )

    wyoming: Annotated[str, AfterValidator(_wyoming)] = Field(
        "",
        description="Wyoming listeners (Home Assistant's protocol), off by default: "
        "[HOST:]PORT=KEY_ID entries, comma-separated (`serve --wyoming`). Each makes its "
        "requests as the API key KEY_ID; HOST defaults to 127.0.0.1.",
    )
    wyoming_max_connections: int = Field(
        100,
        ge=1,
        description="Open connections per Wyoming listener (per process); one more is told "
        "so and closed. Each listener also keeps a share of MAX_CONNECTIONS that the others "
        "cannot take.",
    )
    wyoming_zeroconf: bool = Field(
        False,
        description="Announce each Wyoming listener that is not on a loopback address over "
        "zeroconf (_wyoming._tcp), so Home Assistant finds it (`serve --wyoming-zeroconf`).",
    )
    wyoming_max_audio_seconds: float = Field(
        120.0,
        gt=0,
        description="Longest audio a Wyoming transcription takes: a stream that runs on "
        "past it is answered with an error event and not billed.",
    )

    log_format: Literal["text", "json"] = Field(
        "text",
        description="text: a line per event, as uvicorn writes them; json: one JSON object "
        "per line (time, level, logger, message; a request's line adds request_id, org_id, "
        "key_prefix, method, path, status, error_code, duration_ms, client).",
    )
    drain_timeout_seconds: int = Field(
        30,
        ge=1,
        description="On SIGTERM a node stops accepting connections and gives the requests "
        "in flight this long to finish (then closes them; open WebSocket sessions get half "
        "of it to finish what they took), flushes the request log, and exits 0.",
    )
    metrics_token: Annotated[str | None, AfterValidator(_empty_as_none)] = Field(
        None,
        description="Bearer token GET /metrics requires (401 without it). Unset: /metrics "
        "is open, like /readyz; keep it off the public network then.",
    )
    metrics_org_labels: bool = Field(
        False,
        description="Add an org label to voice_service_requests_total and "
        "voice_service_usage_units_total: a time series per organization, so off by default.",
    )
    max_queued_per_capability: int | None = Field(
        None,
        ge=0,
        description="Requests of one capability (text-to-speech, speech-to-text, cloning) "
        "that may wait for a busy inference pool; one more is refused at once with 502 "
        "and Retry-After (default: 8 x POOL_SIZE).",
    )

    workers: int = Field(
        1, ge=1, description="Processes `serve` starts on this node (its --workers overrides it)."
    )
    cluster_nodes: int = Field(
        1,
        ge=1,
        description="Nodes sharing the Redis. While Redis is unreachable each process allows "
        "a key its limit / (nodes x workers), so the cluster stays within the limit.",
    )
    redis_timeout_seconds: float = Field(
        2.0, gt=0, description="Longest wait for Redis to connect or answer one command."
    )
    db_timeout_seconds: float = Field(
        2.0,
        gt=0,
        description="Longest wait for PostgreSQL to connect or answer one statement.",
    )
    db_pool_size: int = Field(
        5, ge=1, description="PostgreSQL connections each process keeps open."
    )
    db_max_overflow: int = Field(
        5, ge=0, description="Extra PostgreSQL connections a process may open under load."
    )
    db_pool_timeout_seconds: float = Field(
        2.0, gt=0, description="Longest wait for a free pooled connection; then 500."
    )
    idempotent_answer_max_bytes: int = Field(
        32 * 1024 * 1024,
        ge=0,
        description="The largest answer kept for an Idempotency-Key's retries; a larger one "
        "releases its key (a retry runs again, billed only if the first run was not), and "
        "says so in Idempotency-Key-Released.",
    )
    log_spool_max_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024,
        description="Disk each process may use for request-log rows the database could not "
        "take (replayed when it is back).",
    )

    @model_validator(mode="after")
    def _custom_needs_its_directory(self) -> Settings:
        if CUSTOM_WHISPER in self.whisper_model_names and self.whisper_model_dir is None:
            raise ValueError(
                f"WHISPER_MODELS names {CUSTOM_WHISPER}, and WHISPER_MODEL_DIR is not set"
            )
        return self

    @property
    def tts_engine_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.tts_engines.split(",") if name)

    @property
    def stt_engine_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.stt_engines.split(",") if name)

    @property
    def whisper_model_names(self) -> tuple[str, ...]:
        """The models offered, the default first."""
        if self.whisper_models:
            return tuple(self.whisper_models.split(","))
        return (CUSTOM_WHISPER,) if self.whisper_model_dir is not None else ("base",)

    @property
    def piper_voice_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.piper_voices.split(",") if name)

    @property
    def webhook_retries(self) -> tuple[int, ...]:
        return parse_schedule(self.webhook_retry_seconds)

    @property
    def outbound_allowed(self) -> frozenset[tuple[str, int | None]]:
        return parse_hosts(self.outbound_allowed_hosts)

    @property
    def wyoming_listeners(self) -> tuple[WyomingBinding, ...]:
        return parse_wyoming(self.wyoming)

    @property
    def key_rate_limit_ceiling(self) -> int:
        return self.max_key_rate_limit or self.default_rate_limit

    @property
    def queue_bound(self) -> int:
        # Eight jobs a slot: a burst (a client sending eight requests at once to a 2-core
        # node) queues, and at a second or so a job waits seconds, not minutes; a flood is
        # refused long before the queue timeout, and its clients do better retrying
        # (later, or on another node) than waiting in a queue that adds no throughput.
        if self.max_queued_per_capability is None:
            return 8 * self.pool_size
        return self.max_queued_per_capability

    @property
    def db_connections_per_process(self) -> int:
        return self.db_pool_size + self.db_max_overflow

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'voice-service.db').resolve()}"

    @property
    def resolved_models_dir(self) -> Path:
        return self.models_dir or self.data_dir / "models"

    @property
    def is_sqlite(self) -> bool:
        return self.resolved_database_url.startswith("sqlite")
