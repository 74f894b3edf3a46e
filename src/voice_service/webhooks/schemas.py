"""Webhooks as the API shows them."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from voice_service.core.models import SigningSecret, Webhook, WebhookAttempt, WebhookDelivery
from voice_service.core.vocabulary import WebhookEvent
from voice_service.voices.schemas import Timestamp

EXAMPLE_URL = "https://example.com/hooks/voice"
MAX_URL_LENGTH = 2048
MAX_DESCRIPTION_LENGTH = 200
# A delivery's status.
PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


class WebhookIn(BaseModel):
    url: str = Field(
        max_length=MAX_URL_LENGTH,
        description="Where deliveries are POSTed: https, and a public address (unless the "
        "operator allows the host).",
        examples=[EXAMPLE_URL],
    )
    events: list[WebhookEvent] = Field(
        min_length=1, description="What to be told of.", examples=[["transcription.completed"]]
    )
    description: str | None = Field(None, max_length=MAX_DESCRIPTION_LENGTH)


class WebhookPatch(BaseModel):
    url: str | None = Field(None, max_length=MAX_URL_LENGTH, examples=[EXAMPLE_URL])
    events: list[WebhookEvent] | None = Field(None, min_length=1)
    description: str | None = Field(None, max_length=MAX_DESCRIPTION_LENGTH)
    enabled: bool | None = None


class WebhookOut(BaseModel):
    id: str = Field(examples=["wh_5e1a9c3b7d2f4e6a8b0c1d2e"])
    url: str
    events: list[str]
    description: str | None
    enabled: bool
    created_at: Timestamp

    @classmethod
    def of(cls, hook: Webhook) -> WebhookOut:
        return cls(
            id=hook.id,
            url=hook.url,
            events=hook.events,
            description=hook.description,
            enabled=hook.enabled,
            created_at=hook.created_at,
        )


class WebhookCreated(WebhookOut):
    secret: str = Field(
        description="The signing secret (whsec_...), shown this once: verify deliveries "
        "with it (the standardwebhooks package, or OpenAI's client.webhooks.unwrap).",
    )


class WebhookList(BaseModel):
    webhooks: list[WebhookOut]


class AttemptOut(BaseModel):
    number: int
    at: Timestamp
    status_code: int | None = Field(description="The receiver's answer; null: none came.")
    latency_ms: int
    error: str | None = Field(description="Why no answer came (a timeout, a refused address).")


class DeliveryOut(BaseModel):
    id: str = Field(description="The webhook-id every attempt carries.", examples=["msg_..."])
    webhook_id: str | None = Field(description="The webhook it went to; null: a job's own URL.")
    url: str | None = Field(description="The job's own URL it went to; null: a webhook's.")
    job_id: str | None = Field(description="The job it tells of.")
    event: str
    status: str = Field(description="pending, delivered or failed (every retry used).")
    created_at: Timestamp
    delivered_at: Timestamp | None
    attempts: list[AttemptOut]

    @classmethod
    def of(cls, delivery: WebhookDelivery, attempts: Sequence[WebhookAttempt]) -> DeliveryOut:
        return cls(
            id=delivery.id,
            webhook_id=delivery.webhook_id,
            url=delivery.url,
            job_id=delivery.job_id,
            event=delivery.event,
            status=delivery.status,
            created_at=delivery.created_at,
            delivered_at=delivery.delivered_at,
            attempts=[
                AttemptOut(
                    number=a.number,
                    at=a.at,
                    status_code=a.status_code,
                    latency_ms=a.latency_ms,
                    error=a.error,
                )
                for a in attempts
            ],
        )


class DeliveryList(BaseModel):
    deliveries: list[DeliveryOut] = Field(description="Newest first.")


class SigningSecretOut(BaseModel):
    created_at: Timestamp
    previous_valid_until: Timestamp | None = Field(
        description="Until when the previous secret signs beside this one (after a rotation)."
    )

    @classmethod
    def of(cls, found: SigningSecret) -> SigningSecretOut:
        return cls(created_at=found.created_at, previous_valid_until=found.previous_until)


class SigningSecretCreated(SigningSecretOut):
    secret: str = Field(
        description="The organization's signing secret (whsec_...), shown this once: it signs "
        "the deliveries to the webhook_url a transcription job names."
    )
