"""Shared helpers for the benchmark scripts: data paths, timing, medians."""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]


def data_dir(explicit: str | Path | None = None, *parts: str) -> Path:
    """``explicit``, else ``parts`` under the data folder ($JUDGE_REWARD_DATA, ../shared/data; see
    :func:`judge_reward.data.resolve_data_path`); exits naming every path tried when there is none."""
    from judge_reward.data import DataNotFoundError, resolve_data_path

    try:
        return resolve_data_path(explicit, *parts, what="--data")
    except DataNotFoundError as err:
        sys.exit(f"error: {err}")


def summeval(n_docs: int | None = None, data: str | Path | None = None) -> list[list[dict]]:
    """The first ``n_docs`` SummEval documents (all when None), each a list of its 16 system
    summaries; ``data`` is an explicit summeval.json, else the data folder's."""
    rows = json.loads(data_dir(data, "summeval", "summeval.json").read_text())
    docs: dict[str, list[dict]] = {}
    for r in rows:
        docs.setdefault(r["doc_id"], []).append(r)
    return list(docs.values())[:n_docs]


def timings(fn, repeats: int = 3):
    """Run ``fn`` ``repeats`` times; return (seconds of every run, last result)."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return times, out


def timed(fn, repeats: int = 3):
    """Run ``fn`` ``repeats`` times; return (median seconds, last result)."""
    times, out = timings(fn, repeats)
    return statistics.median(times), out


def median_range(xs, digits: int = 2) -> str:
    """``median [min-max]``, how the benchmarks quote a spread."""
    return f"{statistics.median(xs):.{digits}f} [{min(xs):.{digits}f}-{max(xs):.{digits}f}]" if xs else "n/a"


def matmul_peak(dtype) -> float:
    """FLOP/s of a 2048^3 matmul in ``dtype`` on this machine now (median of 5 after a warm-up): the
    reference rate the benchmarks compare their achieved rates with."""
    import torch

    a = torch.randn(2048, 2048, dtype=dtype)
    b = torch.randn(2048, 2048, dtype=dtype)
    a @ b
    seconds, _ = timed(lambda: a @ b, repeats=5)
    return 2 * 2048**3 / seconds


@contextmanager
def serve_in_subprocess(yaml_path: Path, options: list[str], log_path: Path, timeout: float = 600) -> Iterator[str]:
    """Run ``judge-reward serve --config yaml_path *options`` on a free loopback port; yield its URL.

    Waits for ``/ready`` (the judge is loaded), and stops the server with SIGTERM (its graceful
    shutdown) on the way out, killing it if it has not exited within a minute.
    """
    from judge_reward.testing.servers import free_port, wait_ready

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "judge_reward.cli", "serve", "--config", str(yaml_path), "--port", str(port), *options]
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(url, proc, log_path, timeout)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
