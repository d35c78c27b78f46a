"""Shared helpers for the benchmark scripts: data paths, timing, medians."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

DATA = Path(os.environ.get("JUDGE_REWARD_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def summeval(n_docs: int) -> list[list[dict]]:
    """The first ``n_docs`` SummEval documents, each a list of its 16 system summaries."""
    rows = json.loads((DATA / "summeval" / "summeval.json").read_text())
    docs: dict[str, list[dict]] = {}
    for r in rows:
        docs.setdefault(r["doc_id"], []).append(r)
    return list(docs.values())[:n_docs]


def timed(fn, repeats: int = 3):
    """Run ``fn`` ``repeats`` times; return (median seconds, last result)."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out
