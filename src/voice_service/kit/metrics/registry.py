"""The metrics of one app: every family, and the one method that records each event.

A single process keeps them in a registry of the app's own (tests build many apps in one
process, each with its own counts). Under `serve --workers N` the values live in the shared
directory (see `multiprocess`) and an exposition sums every worker's.

Requests and usage are counted where their rows are made (`count_request`, `count_usage`),
so the counters agree with the request log and the usage table. No label names an
organization unless `metrics_org_labels` asks for it: a label value per organization is a
time series per organization.
"""

from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from voice_service.core.vocabulary import Capability
from voice_service.kit.metrics.endpoints import EndpointNames
from voice_service.kit.metrics.multiprocess import forget_dead_workers, worker_exited

# From a cached voice list (milliseconds) to a long transcription (minutes).
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
NO_ORG = "none"  # requests no key was resolved for (401, unknown routes)
RATE_LIMITED = "RATE_LIMITED"


class Metrics:
    def __init__(self, *, org_labels: bool, shared_directory: Path | None) -> None:
        """`shared_directory`: where the worker processes of one node keep their values;
        None for a process of its own."""
        self._shared = shared_directory
        registry = None if shared_directory is not None else CollectorRegistry()
        self._registry = registry
        self._org_labels = org_labels
        self.endpoints = EndpointNames()
        org = ("org",) if org_labels else ()
        self.requests = Counter(
            "voice_service_requests",
            "Requests answered, one per request-log row, by route template and status.",
            ("endpoint", "status", *org),
            registry=registry,
        )
        self.request_duration = Histogram(
            "voice_service_request_duration_seconds",
            "Time from a request's arrival to its log row (a stream's: to its end).",
            ("endpoint",),
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.usage_units = Counter(
            "voice_service_usage_units",
            "Billed units, as in the usage table, by usage endpoint.",
            ("endpoint", *org),
            registry=registry,
        )
        self.rate_limited = Counter(
            "voice_service_rate_limited",
            "Requests refused with 429 RATE_LIMITED.",
            registry=registry,
        )
        self.queue_depth = Gauge(
            "voice_service_inference_queue_depth",
            "Requests waiting for an inference worker.",
            ("capability",),
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.running = Gauge(
            "voice_service_inference_running",
            "Inference workers busy (one request may use several at once).",
            ("capability",),
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.wait = Histogram(
            "voice_service_inference_wait_seconds",
            "Time a request waited for an inference worker (refused requests wait none).",
            ("capability",),
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.rejected = Counter(
            "voice_service_inference_rejected",
            "Requests refused at once (502 with Retry-After): their capability's queue was full.",
            ("capability",),
            registry=registry,
        )
        self.inference = Histogram(
            "voice_service_inference_seconds",
            "Time an engine computed for one request (a stream's steps added up).",
            ("engine",),
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.engine_errors = Counter(
            "voice_service_engine_errors",
            "Inferences that failed in the engine or ran past their deadline (502).",
            ("engine",),
            registry=registry,
        )
        self.audio_seconds = Counter(
            "voice_service_audio_seconds",
            "Seconds of audio synthesized, or transcribed to the end.",
            ("capability",),
            registry=registry,
        )
        self.provider_requests = Counter(
            "voice_service_provider_requests",
            "Requests sent to a provider's replicas, by outcome: ok; error (refused, reset, "
            "5xx, 429 or garbage); timeout; rejected (the provider refused it with a 4xx).",
            ("provider", "outcome"),
            registry=registry,
        )
        self.provider_duration = Histogram(
            "voice_service_provider_request_seconds",
            "Time from sending a request to a provider to its answer's end (a stream's last "
            "byte), by provider.",
            ("provider",),
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.wyoming_connections = Gauge(
            "voice_service_wyoming_connections",
            "Wyoming connections open (Home Assistant's protocol, VOICE_SERVICE_WYOMING).",
            multiprocess_mode="livesum",
            registry=registry,
        )
        for capability in Capability:  # present, at 0, before the first request
            self.queue_depth.labels(capability)
            self.running.labels(capability)

    def count_request(
        self,
        method: str,
        path: str,
        status: int,
        duration_ms: int,
        error_code: str | None,
        org_id: str | None,
    ) -> None:
        """One request-log row was made: called once per row, whoever writes it."""
        endpoint = self.endpoints.of(method, path)
        org = (org_id or NO_ORG,) if self._org_labels else ()
        self.requests.labels(endpoint, str(status), *org).inc()
        self.request_duration.labels(endpoint).observe(duration_ms / 1000)
        if error_code == RATE_LIMITED:
            self.rate_limited.inc()

    def count_usage(self, endpoint: str, units: int, org_id: str) -> None:
        """One usage row was committed."""
        org = (org_id,) if self._org_labels else ()
        self.usage_units.labels(endpoint, *org).inc(units)

    def count_audio(self, capability: Capability, seconds: float) -> None:
        self.audio_seconds.labels(capability).inc(seconds)

    def queue_changed(self, capability: Capability, waiting: int, running: int) -> None:
        self.queue_depth.labels(capability).set(waiting)
        self.running.labels(capability).set(running)

    def waited(self, capability: Capability, seconds: float) -> None:
        self.wait.labels(capability).observe(seconds)

    def refused(self, capability: Capability) -> None:
        self.rejected.labels(capability).inc()

    def inferred(self, engine: str, seconds: float, *, failed: bool) -> None:
        self.inference.labels(engine).observe(seconds)
        if failed:
            self.engine_errors.labels(engine).inc()

    def provider_called(self, provider: str, outcome: str, seconds: float) -> None:
        self.provider_requests.labels(provider, outcome).inc()
        self.provider_duration.labels(provider).observe(seconds)

    def exposition(self) -> bytes:
        """The text format of every metric: this app's, or every worker's of the node."""
        if self._registry is not None:
            return generate_latest(self._registry)
        assert self._shared is not None
        forget_dead_workers(self._shared)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self._shared))  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def close(self) -> None:
        """This process is leaving: its gauges no longer count toward the node's."""
        if self._shared is not None:
            worker_exited(self._shared, os.getpid())
