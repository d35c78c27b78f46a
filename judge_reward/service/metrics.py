"""Prometheus metrics of the reward service, in a registry of its own (one per app)."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def reason_label(reason: str | None) -> str:
    """A failure reason with its numbers blanked, so the label set stays small."""
    text = re.sub(r"\d+(\.\d+)?", "N", reason or "unknown")
    return text[:80]


class ServiceMetrics:
    """Counters, histograms and gauges exported on ``/metrics``."""

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "judge_reward_requests", "HTTP requests by endpoint and status code", ["endpoint", "status"], registry=r
        )
        self.latency = Histogram(
            "judge_reward_request_seconds", "Request latency by endpoint", ["endpoint"],
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.items = Counter("judge_reward_items", "Items received for scoring", ["endpoint"], registry=r)
        self.rejected = Counter(
            "judge_reward_rejected", "Requests turned away with 503 (queue_full, loading, draining, failed)",
            ["reason"], registry=r,
        )
        self.failures = Counter(
            "judge_reward_failures", "Scores the judge failed to produce (None value), by reason", ["reason"], registry=r
        )
        self.batch_items = Histogram(
            "judge_reward_batch_items", "Items per judge.score call", buckets=SIZE_BUCKETS, registry=r
        )
        self.batch_requests = Histogram(
            "judge_reward_batch_requests", "Requests merged into one judge.score call", buckets=SIZE_BUCKETS, registry=r
        )
        self.batch_seconds = Histogram(
            "judge_reward_batch_seconds", "Seconds per judge.score call", buckets=LATENCY_BUCKETS, registry=r
        )
        self.queue_items = Gauge("judge_reward_queue_items", "Items waiting for the judge", registry=r)
        self.queue_requests = Gauge("judge_reward_queue_requests", "Request parts waiting for the judge", registry=r)
        self.in_flight = Gauge("judge_reward_in_flight_requests", "HTTP requests being handled", registry=r)
        self.ready = Gauge("judge_reward_ready", "1 when the judge is loaded and taking requests", registry=r)

    def observe_batch(self, items: int, requests: int, seconds: float, results) -> None:
        self.batch_items.observe(items)
        self.batch_requests.observe(requests)
        self.batch_seconds.observe(seconds)
        for per_item in results:
            for score in per_item.values():
                if score.value is None:
                    self.failures.labels(reason_label(score.reason)).inc()
