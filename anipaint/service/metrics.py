"""Prometheus metrics for one app instance (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from anipaint.service.queue.jobs import JobQueue

STAGE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ServiceMetrics:
    """Queue depth, jobs by outcome, seconds per stage, and requests turned away (by reason)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.queue_depth = Gauge("anipaint_queue_depth", "Jobs waiting for a free painter", registry=self.registry)
        self.jobs_running = Gauge("anipaint_jobs_running", "Jobs being painted now", registry=self.registry)
        self.jobs = Counter(
            "anipaint_jobs",
            "Finished jobs by outcome (done, failed, cancelled)",
            ["outcome"],
            registry=self.registry,
        )
        self.stage_seconds = Histogram(
            "anipaint_stage_seconds",
            "Seconds spent per stage (queue, decode, paint, faces, encode)",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self.rejected = Counter(
            "anipaint_requests_rejected",
            "Requests turned away, by reason (busy, too_large, not_image, ...)",
            ["reason"],
            registry=self.registry,
        )
        for outcome in ("done", "failed", "cancelled"):
            self.jobs.labels(outcome)
        for reason in ("busy", "too_large", "not_image", "bad_request", "timeout", "rate_limited", "no_room"):
            self.rejected.labels(reason)

    def watch(self, queue: JobQueue) -> None:
        self.queue_depth.set_function(queue.depth)
        self.jobs_running.set_function(queue.running)

    # QueueObserver
    def stage_done(self, stage: str, seconds: float) -> None:
        self.stage_seconds.labels(stage).observe(seconds)

    def job_done(self, outcome: str) -> None:
        self.jobs.labels(outcome).inc()

    def reject(self, reason: str) -> None:
        self.rejected.labels(reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
