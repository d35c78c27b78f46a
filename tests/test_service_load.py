"""A small run of benchmarks/service_load.py: concurrent clients, every answer checked against its input."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark():
    spec = importlib.util.spec_from_file_location("service_load", ROOT / "benchmarks" / "service_load.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_small_load_run_loses_and_mixes_up_nothing(tmp_path):
    bench = load_benchmark()
    cfg = bench.LoadConfig(clients=8, requests=8, unique=64, sources=4, max_items=4, max_wait_ms=20.0)
    report = bench.run(cfg, workdir=tmp_path)
    assert report.attempted == 64 and report.requests == 64
    assert report.lost == 0 and report.mismatched == 0 and report.ok == 64, report.errors
    assert report.latency_ms["p50"] > 0 and report.latency_ms["p99"] >= report.latency_ms["p50"]
    # Concurrent requests were merged: fewer judge calls than requests, more than one request per call.
    assert report.judge_calls < 64 and report.batch_requests_mean > 1
    assert report.batch_items_mean > 1 and report.batch_items_seen["max"] <= cfg.max_batch_size


def test_two_replicas_one_stopped_half_way_lose_nothing(tmp_path):
    bench = load_benchmark()
    cfg = bench.LoadConfig(clients=4, requests=10, unique=32, sources=4, max_items=4, max_wait_ms=5.0,
                           replicas=2, retries=3, stop_one_at=0.5)
    report = bench.run(cfg, workdir=tmp_path)
    assert report.stopped_replica_at == 20
    assert report.lost == 0 and report.mismatched == 0 and report.ok == 40, report.errors
    # Both replicas took requests; the stopped one's failed attempts were answered by the other.
    assert all(n > 0 for n in report.requests_by_replica)
    assert report.failed_by_replica[0] == 0 and sum(report.retried.values()) == report.failed_by_replica[1]
