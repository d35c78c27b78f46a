"""Concurrency of the OpenAI-compatible backend against the fault server with a fixed latency.

    python benchmarks/openai_concurrency.py [--requests 256] [--pool 32] [--latency 0.2]

With every answer taking ``latency`` seconds, ``requests`` G-Eval requests through a pool of
``pool`` should take about ``requests / pool * latency`` seconds (the bound: perfect pipelining,
zero client overhead). Prints the measured time and its ratio to that bound; a sequential client
would show a ratio of ``pool``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fault server is a test double of the clone (tests/doubles), not installed

from judge_reward.backends.base import CandidateRequest  # noqa: E402
from judge_reward.backends.openai_compat import OpenAIBackend, OpenAIBackendConfig  # noqa: E402
from tests.doubles.fake_openai import FakeOpenAIServer, FakeServerConfig  # noqa: E402

ASPECTS = ("Coherence", "Consistency", "Fluency", "Relevance")


@contextlib.contextmanager
def _server(latency: float, in_process: bool):
    """The fault server in this process, or (default) in a child process so that its work and the
    client's do not share one GIL."""
    if in_process:
        with FakeOpenAIServer(FakeServerConfig(latency_s=latency)) as server:
            yield server.base_url, server
        return
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.doubles.fake_openai", "--latency", str(latency), "--max-seconds", "300"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("READY "):
            raise SystemExit(f"fake server did not start: {line!r}")
        yield line.split(" ", 1)[1], None
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def run(requests: int, pool: int, latency: float, repeats: int, in_process: bool = False) -> dict:
    reqs = [
        CandidateRequest(f"Completion {i // len(ASPECTS)}.\n- {ASPECTS[i % len(ASPECTS)]}: ", tuple("12345"))
        for i in range(requests)
    ]
    bound = requests / pool * latency
    times = []
    with _server(latency, in_process) as (base_url, in_proc):
        cfg = OpenAIBackendConfig(model="fake", base_url=base_url, max_concurrency=pool)
        with OpenAIBackend(cfg) as backend:
            for _ in range(repeats):
                start = time.perf_counter()
                out = backend.candidate_logprobs(reqs)
                times.append(time.perf_counter() - start)
                failed = [r.error for r in out if r.error]
                if failed:
                    raise SystemExit(f"{len(failed)} requests failed, first: {failed[0]}")
            stats = backend.stats()
        peak = in_proc.max_in_flight if in_proc is not None else None
    best = min(times)
    return {
        "requests": requests, "pool": pool, "latency_s": latency, "bound_s": bound,
        "times_s": [round(t, 3) for t in times], "best_s": round(best, 3), "ratio_to_bound": round(best / bound, 3) if bound else None,
        "peak_in_flight": peak, "http_requests": stats["http_requests"], "retries": stats["retries"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--pool", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--in-process", action="store_true", help="run the server in this process (shares the GIL)")
    args = ap.parse_args()
    result = run(args.requests, args.pool, args.latency, args.repeats, args.in_process)
    print(f"{result['requests']} requests, pool {result['pool']}, latency {result['latency_s'] * 1000:.0f} ms: "
          f"best {result['best_s']:.3f} s (runs {result['times_s']}), bound {result['bound_s']:.3f} s, "
          f"ratio {result['ratio_to_bound']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
