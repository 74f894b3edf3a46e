"""Tables. Ids are prefixed random tokens (acct_, org_, key_, voice_, req_)."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    false,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on every backend (SQLite hands back naive datetimes)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime")
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime, list[str]: JSON}


class Account(Base):
    __tablename__ = "accounts"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="active")
    disabled_services: Mapped[list[str]] = mapped_column(default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Organization(Base):
    __tablename__ = "organizations"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="active")
    disabled_services: Mapped[list[str]] = mapped_column(default=list)
    clone_limit: Mapped[int | None] = mapped_column(Integer)
    monthly_units: Mapped[int | None] = mapped_column(Integer)  # billed per UTC month; None: no cap
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# The console's own key of an organization (see below): one, enforced by the database,
# since parallel first uses each insert one (migration 0007).
LIVE_CONSOLE_KEY = "kind = 'console' AND revoked_at IS NULL"


class ApiKey(Base):
    __tablename__ = "api_keys"
    __table_args__ = (
        Index(
            "ux_api_keys_one_console_key",
            "org_id",
            unique=True,
            sqlite_where=text(LIVE_CONSOLE_KEY),
            postgresql_where=text(LIVE_CONSOLE_KEY),
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"), index=True)
    name: Mapped[str | None] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    rate_limit: Mapped[int | None] = mapped_column(Integer)
    scopes: Mapped[list[str] | None]  # what it may do (vocabulary.Scope); None: everything
    monthly_units: Mapped[int | None] = mapped_column(Integer)  # billed per UTC month; None: no cap
    # "api": a key someone holds. "console": the organization's own key for requests the
    # console makes on a signed-in user's behalf; its secret was never kept by anyone.
    kind: Mapped[str] = mapped_column(String(16), default="api", server_default="api")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]


class Voice(Base):
    __tablename__ = "voices"
    __table_args__ = (Index("ix_voices_org_listing", "org_id", "deleted_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str | None] = mapped_column(ForeignKey("organizations.id"))
    type: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200))
    language: Mapped[str | None] = mapped_column(String(16))
    # The engine voice that speaks it: a catalogue key, or for a clone its base voice.
    engine_voice: Mapped[str] = mapped_column(String(200))
    profile: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # A clone's likeness to its sample, 0-1 (`engines.protocols.Clone`); null for
    # catalogue voices, clones made at a provider and clones made before it was measured.
    resemblance: Mapped[float | None]
    description: Mapped[str | None] = mapped_column(Text)
    consent: Mapped[str | None] = mapped_column(Text)
    consented_at: Mapped[datetime | None]
    consent_key_id: Mapped[str | None] = mapped_column(String(40))
    sample_sha256: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    deleted_at: Mapped[datetime | None]


class VoiceSample(Base):
    """A clone's consented sample, the record of what was cloned (synthesis uses only the
    profile). The default sample store: every node reaches it, and the voice's delete
    removes it in the same transaction. A table of its own, so that reading voices never
    reads megabytes of audio."""

    __tablename__ = "voice_samples"

    voice_id: Mapped[str] = mapped_column(ForeignKey("voices.id"), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RequestLogEntry(Base):
    __tablename__ = "request_log"
    __table_args__ = (Index("ix_request_log_org_created", "org_id", "created_at"),)

    request_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str | None] = mapped_column(String(40))
    key_id: Mapped[str | None] = mapped_column(String(40))
    method: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(String(2048))
    status: Mapped[int] = mapped_column(Integer)
    error_code: Mapped[str | None] = mapped_column(String(40))
    duration_ms: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    bytes_sent: Mapped[int | None] = mapped_column(BigInteger)  # streamed responses only
    # An idempotent request's stored answer sent again (never billed).
    replayed: Mapped[bool] = mapped_column(default=False, server_default=false())
    # What the request made that outlives it, for a customer to find (a job's id).
    resource_id: Mapped[str | None] = mapped_column(String(40))
    # The transcription model that heard it ("large-v3-turbo"), or "provider:NAME".
    model: Mapped[str | None] = mapped_column(String(64))


class UsageRecord(Base):
    __tablename__ = "usage_records"
    __table_args__ = (Index("ix_usage_org_created", "org_id", "created_at"),)

    request_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"))
    endpoint: Mapped[str] = mapped_column(String(40))
    units: Mapped[int] = mapped_column(Integer)
    voice_id: Mapped[str | None] = mapped_column(String(40))  # the voice that spoke, if any
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class UnitHold(Base):
    """Units a request in flight was allowed against a monthly cap: counted as used until
    the request is billed (its usage row replaces the hold) or ends otherwise (the hold is
    dropped; one a crash left is ignored once older than any request lives)."""

    __tablename__ = "unit_holds"
    __table_args__ = (Index("ix_unit_holds_org_created", "org_id", "created_at"),)

    request_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"))
    units: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # A job's hold lasts until the job ends, past any request's lifetime.
    lasts_until: Mapped[datetime | None]


class IdempotencyEntry(Base):
    """An `Idempotency-Key` an organization used in the last 24 h: the request it named
    (its fingerprint), who runs it, and once done, its answer to send again. The body is
    kept here, or in the S3 sample store when one is configured (`body_in_store`)."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (Index("ix_idempotency_keys_expires", "expires_at"),)

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))  # SHA-256 of method, path, body
    request_id: Mapped[str] = mapped_column(String(40))  # the request running (or that ran) it
    done: Mapped[bool] = mapped_column(default=False)
    lease_until: Mapped[datetime]  # while not done: when another request may take it over
    billed: Mapped[bool] = mapped_column(default=False)  # its success's usage row exists
    status: Mapped[int | None] = mapped_column(Integer)
    error_code: Mapped[str | None] = mapped_column(String(40))
    content_type: Mapped[str | None] = mapped_column(String(200))
    body: Mapped[bytes | None] = mapped_column(LargeBinary)
    body_in_store: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]


class RealtimeSession(Base):
    """A realtime session open on some node, counted against its key's limit. Its node
    renews `lease_until` while it runs and deletes the row when it closes; a row whose node
    died stops counting once its lease has run out."""

    __tablename__ = "realtime_sessions"
    __table_args__ = (Index("ix_realtime_sessions_key", "key_id", "lease_until"),)

    request_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"))
    lease_until: Mapped[datetime]


class ServiceMeta(Base):
    """Facts every node of a cluster must agree on, one row each (see `cluster.py`)."""

    __tablename__ = "service_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class TenancyVersion(Base):
    """One row: a counter that every change to what nodes cache (keys, tenants' status and
    services, clones) moves on in its own transaction (see `tenancy/cache.py`)."""

    __tablename__ = "tenancy_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)


class User(Base):
    """A person who signs in to the console; sees every organization of their account."""

    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), index=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)  # stored lower-cased
    password_hash: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="active")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_sign_in_at: Mapped[datetime | None]


class ConsoleSession(Base):
    """A signed-in browser. The cookie holds a token; only its SHA-256 is stored here."""

    __tablename__ = "console_sessions"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]


class SignInThrottle(Base):
    """Consecutive failed sign-ins for one account (`user:<id>`) or unknown email
    (`email:<address>`), shared by every node; an attempt counts from when it starts."""

    __tablename__ = "sign_in_throttle"

    subject: Mapped[str] = mapped_column(String(330), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    retry_at: Mapped[datetime | None]
    last_failed_at: Mapped[datetime] = mapped_column(index=True)


class AuditEvent(Base):
    """Who changed what through the console, and every sign-in attempt."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_account_created", "account_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    account_id: Mapped[str | None] = mapped_column(String(40))
    user_id: Mapped[str | None] = mapped_column(String(40))
    email: Mapped[str | None] = mapped_column(String(320))
    action: Mapped[str] = mapped_column(String(40))
    target: Mapped[str | None] = mapped_column(String(200))
    ip: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class QueueJob(Base):
    """A job of SAQ's queue (kit/job_queue.py): its key, SAQ's serialized job, and what the
    queue selects on."""

    __tablename__ = "queue_jobs"
    __table_args__ = (Index("ix_queue_jobs_dequeue", "queue", "status", "priority", "scheduled"),)

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    queue: Mapped[str] = mapped_column(String(100))
    job: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    scheduled: Mapped[int] = mapped_column(BigInteger)  # epoch seconds
    expire_at: Mapped[float | None]  # epoch seconds; None: kept


class QueueWorker(Base):
    """A queue worker's last report (SAQ's worker info), until `expire_at`."""

    __tablename__ = "queue_workers"

    worker_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    queue_key: Mapped[str | None] = mapped_column(String(100))
    stats: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    expire_at: Mapped[float]  # epoch seconds


class BlobChunk(Base):
    """A file kept in the database (kit/blobs.py), in chunks: a job's audio, up to a GiB,
    is written and read a chunk at a time, never whole in memory."""

    __tablename__ = "blob_chunks"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    content: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class TranscriptionJob(Base):
    """A long recording transcribed in the background (jobs/): what was asked, how far it
    is, and once done its transcript (or why it failed)."""

    __tablename__ = "transcription_jobs"
    __table_args__ = (
        Index("ix_transcription_jobs_org_created", "org_id", "created_at"),
        Index("ix_transcription_jobs_finished", "finished_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id"))
    request_id: Mapped[str] = mapped_column(String(40), unique=True)  # of its POST
    status: Mapped[str] = mapped_column(String(16))
    endpoint: Mapped[str] = mapped_column(String(40))  # what its usage is billed under
    language: Mapped[str | None] = mapped_column(String(8))  # asked for, or detected
    model: Mapped[str | None] = mapped_column(String(64))  # asked for; None: the default
    word_timestamps: Mapped[bool] = mapped_column(default=False)
    # Told apart when asked: SpeakerHints.given() ({} for none); None: not diarized.
    speakers: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    keep_audio: Mapped[bool] = mapped_column(default=False)
    audio: Mapped[str | None] = mapped_column(String(200))  # its blob; None once deleted
    audio_bytes: Mapped[int] = mapped_column(BigInteger)
    # Exact duration as "numerator/denominator" (a Fraction), measured at submission.
    duration: Mapped[str] = mapped_column(String(64))
    done_seconds: Mapped[float] = mapped_column(default=0.0)
    units: Mapped[int | None] = mapped_column(Integer)  # billed, once completed
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error_code: Mapped[str | None] = mapped_column(String(40))
    error_message: Mapped[str | None] = mapped_column(Text)
    # Told when it ends, signed with the organization's signing secret.
    webhook_url: Mapped[str | None] = mapped_column(String(2048))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]

    @property
    def duration_fraction(self) -> Fraction:
        return Fraction(self.duration)


class Webhook(Base):
    """Where an organization wants to hear of its events (webhooks/): a URL, the events,
    and the secret deliveries are signed with (Standard Webhooks, `whsec_...`)."""

    __tablename__ = "webhooks"
    __table_args__ = (Index("ix_webhooks_org", "org_id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[list[str]] = mapped_column(JSON)
    secret: Mapped[str] = mapped_column(String(100))
    description: Mapped[str | None] = mapped_column(String(200))
    enabled: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SigningSecret(Base):
    """The organization's secret for the deliveries to a job's own `webhook_url`; after a
    rotation the previous one signs too, for a while, so receivers can switch over."""

    __tablename__ = "webhook_signing_secrets"

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"), primary_key=True)
    secret: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    previous: Mapped[str | None] = mapped_column(String(100))
    previous_until: Mapped[datetime | None]


class WebhookDelivery(Base):
    """One event for one receiver: a registered webhook, or (`webhook_id` None) the `url`
    a job named. Its id is the `webhook-id` every attempt carries."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_hook_created", "webhook_id", "created_at"),
        Index("ix_webhook_deliveries_job", "job_id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    webhook_id: Mapped[str | None] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    url: Mapped[str | None] = mapped_column(String(2048))  # a job's own, without a webhook
    job_id: Mapped[str | None] = mapped_column(String(40))  # the job it tells of
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    event: Mapped[str] = mapped_column(String(60))
    payload: Mapped[str] = mapped_column(Text)  # the JSON body, signed as sent
    status: Mapped[str] = mapped_column(String(16))  # pending, delivered, failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    delivered_at: Mapped[datetime | None]


class WebhookAttempt(Base):
    """One try of a delivery: when, how long, and what the receiver answered."""

    __tablename__ = "webhook_attempts"

    delivery_id: Mapped[str] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(default=utcnow)
    status_code: Mapped[int | None] = mapped_column(Integer)  # None: no answer
    latency_ms: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(300))


class PronunciationDictionary(Base):
    """An organization's rules for saying words (pronunciation/): each change makes a new
    version, and a request names a version or takes the latest."""

    __tablename__ = "pronunciation_dictionaries"
    __table_args__ = (Index("ix_pronunciation_dictionaries_org", "org_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    name: Mapped[str] = mapped_column(String(100))
    description: Mapped[str | None] = mapped_column(String(1000))
    language: Mapped[str | None] = mapped_column(String(35))  # a PLS file's xml:lang
    latest_version_id: Mapped[str] = mapped_column(String(40))
    latest_rules: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    archived_at: Mapped[datetime | None]
    # When it became one of the organization's defaults (the earliest comes first), which
    # speech that names no dictionaries is said with.
    default_since: Mapped[datetime | None]


class PronunciationDictionaryVersion(Base):
    """One version's rules, never changed once written (ElevenLabs' JSON shape of a rule)."""

    __tablename__ = "pronunciation_dictionary_versions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    dictionary_id: Mapped[str] = mapped_column(
        ForeignKey("pronunciation_dictionaries.id", ondelete="CASCADE"), index=True
    )
    rules: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SpokenText(Base):
    """The edges of a speech request's text, kept a while (`speech/stitching.py`) so that a
    later request may name it as the text said before or after its own."""

    __tablename__ = "spoken_texts"
    __table_args__ = (Index("ix_spoken_texts_org_created", "org_id", "created_at"),)

    request_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    org_id: Mapped[str] = mapped_column(String(40))
    head: Mapped[str] = mapped_column(Text)  # the text's start
    tail: Mapped[str] = mapped_column(Text)  # and its end
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
