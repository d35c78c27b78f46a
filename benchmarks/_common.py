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
from typing import Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]


def data_dir(explicit: str | Path | None = None, *parts: str) -> Path:
    """``explicit``, else ``parts`` under the data folder ($JUDGE_REWARD_DATA, ../shared/data; see
    :func:`judge_reward.data.resolve_data_path`); exits naming every path tried when there is none."""
    from judge_reward.data import DataNotFoundError, resolve_data_path

    try:
        return resolve_data_path(explicit, *parts, what="--data")
    except DataNotFoundError as err:
        sys.exit(f"error: {err}")


def judge_config(name: str | Path, dtype: str | None = None, cache: str | Path | None = None,
                 guard_settings: Sequence[str] = ()):
    """A judge config (built-in name or YAML path) with the judge's dtype and judgment cache a script's
    ``--dtype`` / ``--cache`` gave (each left as the config has it when None), and each
    ``GUARD=JSON`` of ``guard_settings`` (a script's ``--setting``) merged into that guard's section."""
    from judge_reward.judge import JudgeConfig

    cfg = JudgeConfig.load(name)
    if dtype:
        cfg.backend = {**cfg.backend, "dtype": dtype}
    if cache:
        cfg.cache = {**(cfg.cache or {}), "path": str(cache)}
    guards = cfg.reward.setdefault("guards", {}) if guard_settings else {}
    for setting in guard_settings:
        guard, _, fields = setting.partition("=")
        guards[guard] = {**guards.get(guard, {}), **json.loads(fields)}
    return cfg


def writer_pairs(articles, max_source_words: int) -> list:
    """Zhang et al.'s articles (:func:`judge_reward.bias_audit.data.load_held_out_articles`) as probe
    pairs: each article's first writer summary against the article cut to ``max_source_words`` words,
    as ``judge-reward validate`` probes."""
    from judge_reward.methods.base import Item

    return [Item(a.human_summaries[0], cut_words(a.article, max_source_words), None, a.article_id) for a in articles]


def chosen_sets(parser, value: str, known: Sequence[str]) -> set[str]:
    """The comma-separated set names of a script's ``--sets`` ``value``; any outside ``known``, or
    none at all, is the parser's usage error (exit code 2)."""
    chosen = {s.strip() for s in value.split(",") if s.strip()}
    if not chosen or chosen - set(known):
        parser.error(f"--sets: expected {' and/or '.join(known)}, got {value!r}")
    return chosen


def cut_words(text: str, n: int) -> str:
    """The first ``n`` whitespace-separated words of ``text``."""
    return " ".join(text.split()[:n])


def summeval(n_docs: int | None = None, data: str | Path | None = None) -> list[list[dict]]:
    """The first ``n_docs`` SummEval documents (all when None), each a list of its 16 system
    summaries; ``data`` is an explicit summeval.json, else the data folder's."""
    rows = json.loads(data_dir(data, "summeval", "summeval.json").read_text())
    docs: dict[str, list[dict]] = {}
    for r in rows:
        docs.setdefault(r["doc_id"], []).append(r)
    return list(docs.values())[:n_docs]


def timings(fn, repeats: int = 3, before=None):
    """Run ``fn`` ``repeats`` times; return (seconds of every run, last result). ``before`` runs,
    untimed, ahead of each run: pass a backend's ``clear_token_memo`` so that a run does not find
    the texts of the run before it already tokenised (a judge meets each new text once)."""
    times, out = [], None
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return times, out


def timed(fn, repeats: int = 3, before=None):
    """Run ``fn`` ``repeats`` times; return (median seconds, last result); ``before`` as in :func:`timings`."""
    times, out = timings(fn, repeats, before)
    return statistics.median(times), out


def median_range(xs, digits: int = 2) -> str:
    """``median [min-max]``, how the benchmarks quote a spread."""
    return f"{statistics.median(xs):.{digits}f} [{min(xs):.{digits}f}-{max(xs):.{digits}f}]" if xs else "n/a"


def matmul_peak(dtype, device="cpu") -> float:
    """FLOP/s of a square matmul in ``dtype`` on ``device`` now (median of 5 after a warm-up): the
    reference rate the benchmarks compare their achieved rates with. 2048^3 on a CPU; 8192^3 on a
    GPU, where a 2048^3 product is too small to fill the chip."""
    import torch

    n = 8192 if torch.device(device).type == "cuda" else 2048
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)

    def product():
        a @ b
        synchronize(device)

    product()
    seconds, _ = timed(product, repeats=5)
    return 2 * n**3 / seconds


def synchronize(device) -> None:
    """Wait for the GPU's queued work (timings on CUDA measure launches otherwise); no-op on a CPU."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def device_line(device) -> str:
    """Names the hardware a figure was measured on: the GPU's name, or the CPU's thread count."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"device {torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda}, torch {torch.__version__})"
    return f"device CPU, {torch.get_num_threads()} torch threads (torch {torch.__version__})"


@contextmanager
def serve_in_subprocess(yaml_path: Path, options: list[str], log_path: Path, timeout: float = 600,
                        process: bool = False) -> Iterator:
    """Run ``judge-reward serve --config yaml_path *options`` on a free loopback port; yield its URL
    (``process=True``: the URL and the ``Popen``, for a caller that stops the server itself).

    Waits for ``/ready`` (the judge is loaded), and stops the server with SIGTERM (its graceful
    shutdown) on the way out, killing it if it has not exited within a minute.
    """
    from tests.doubles.servers import free_port, wait_ready

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "judge_reward.cli", "serve", "--config", str(yaml_path), "--port", str(port), *options]
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(url, proc, log_path, timeout)
        yield (url, proc) if process else url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
