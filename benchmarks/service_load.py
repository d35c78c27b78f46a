"""Load test of the reward service: many concurrent clients, every answer checked against its own input.

A tiny random judge (the test suite's Llama with a small BPE vocabulary, saved to a temporary directory) is served by
the real ``judge-reward serve`` command in a subprocess on loopback. ``--clients`` concurrent clients
each send ``--requests`` requests of 1..``--max-items`` items that share a source (like the G
completions of one GRPO prompt); a share of them (``--openrlhf-share``) use OpenRLHF's
``/get_reward``, the rest ``/v1/score``. Every answer is compared with the in-process score of the
request's own items (same weights), so a lost, failed, swapped or mismatched answer is counted.

Reported: lost / mismatched / rejected requests, latency p50/p90/p99, requests and items per
second, and the batch sizes the server achieved (from its ``/metrics`` and from each answer).

Several replicas (``--replicas``): that many servers on this machine, and the requests go through
the project's client (``JudgeServiceClient``), which spreads them over the replicas and, with
``--retries``, moves a failed attempt to another replica. ``--stop-one-at 0.5`` sends SIGTERM to
one replica (it drains, then exits) once half the requests are done: with retries, nothing is lost.
With ``--retries 0`` (the default) every answer that is not a 200 counts as lost, as before.

Usage::

    python benchmarks/service_load.py                       # 64 clients x 1000 requests
    python benchmarks/service_load.py --clients 8 --requests 20 --json out.json
    python benchmarks/service_load.py --replicas 2 --retries 3 --stop-one-at 0.5

Only loopback is used; the server is stopped (SIGTERM, graceful) at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

import httpx  # noqa: E402
from _common import serve_in_subprocess  # noqa: E402

from judge_reward.service.client import JudgeServiceClient, ServiceError  # noqa: E402
from judge_reward.service.config import ServiceRewardConfig  # noqa: E402

WORDS = ("council park river lane budget school rain storm market bridge vote mayor road tree "
         "library museum train station harbour festival").split()


@dataclass
class LoadConfig:
    """One load-test run."""

    clients: int = 64
    """Concurrent clients, each sending its requests one after another."""
    requests: int = 1000
    """Requests per client."""
    max_items: int = 4
    """Items per request are drawn from 1..max_items (one source per request)."""
    sources: int = 8
    """Distinct sources (articles); requests for the same source share its prompt prefix."""
    unique: int = 2048
    """Size of the pool of distinct items requests are drawn from (each scored in-process once)."""
    openrlhf_share: float = 0.25
    """Fraction of requests sent to /get_reward instead of /v1/score."""
    method: str = "gptscore"
    aspect: str = "coherence"
    max_batch_size: int = 256
    max_wait_ms: float = 10.0
    tokenizer: str = "bpe"
    """Tiny judge's tokenizer: ``bpe`` (shorter sequences) or ``char``."""
    tolerance: float = 1e-4
    """Largest |service - in-process| difference accepted (batch composition changes float sums)."""
    seed: int = 0
    timeout_s: float = 300.0
    torch_threads: int = 1
    """Torch threads of the server (0: torch's default). One is fastest on a small, shared CPU."""
    replicas: int = 1
    """Servers started on this machine; the client spreads the requests over them."""
    retries: int = 0
    """The client's retries per request (another replica first); 0: every non-200 answer is lost."""
    stop_one_at: float = 0.0
    """SIGTERM one replica once this share of the requests is done (0: never); needs ``replicas`` >= 2."""


@dataclass
class LoadReport:
    config: dict
    requests: int = 0
    """Requests that got an HTTP answer (any status)."""
    attempted: int = 0
    ok: int = 0
    lost: int = 0
    """Requests without a 200 answer (errors, timeouts, 5xx)."""
    rejected: int = 0
    """503 answers (queue full); counted in ``lost`` too."""
    mismatched: int = 0
    """200 answers whose values, ids or lengths differ from the in-process scores of their own items."""
    items: int = 0
    seconds: float = 0.0
    latency_ms: dict = field(default_factory=dict)
    requests_per_s: float = 0.0
    items_per_s: float = 0.0
    batch_items_mean: float = 0.0
    """Mean items per judge call, from the server's judge_reward_batch_items histogram."""
    batch_requests_mean: float = 0.0
    judge_calls: int = 0
    batch_items_seen: dict = field(default_factory=dict)
    """Percentiles of the batch size each answered request ran in."""
    requests_by_replica: list = field(default_factory=list)
    """Attempts sent to each replica (in start order), retries included."""
    failed_by_replica: list = field(default_factory=list)
    """Attempts that failed on each replica (another replica then answered them, if retries allowed)."""
    retried: dict = field(default_factory=dict)
    """The client's retries by reason."""
    stopped_replica_at: int = 0
    """Requests done when one replica got SIGTERM (0: none was stopped)."""
    errors: list = field(default_factory=list)


def save_tiny_judge(directory: Path, cfg: LoadConfig) -> Path:
    """Write the tiny model and a judge YAML pointing at it; return the YAML path."""
    from tiny_models import make_model, make_tokenizer

    tok = make_tokenizer(cfg.tokenizer)
    model = make_model(tok, "llama", seed=cfg.seed)
    model.save_pretrained(directory / "model")
    tok.save_pretrained(directory / "model")
    yaml_path = directory / "judge.yaml"
    yaml_path.write_text(
        "backend: {kind: hf, model: %s, device: cpu, dtype: float32, progress: false}\n"
        "aspects_file: summeval\naspects: [%s]\nmethod: %s\ncache: {memory: false}\n"
        % (json.dumps(str(directory / "model")), cfg.aspect, cfg.method)
    )
    return yaml_path


def make_pool(cfg: LoadConfig) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(cfg.seed)
    sources = [" ".join(rng.choice(WORDS) for _ in range(40)).capitalize() + "." for _ in range(cfg.sources)]
    per_source = max(1, cfg.unique // cfg.sources)
    outputs = [[f"{k}. " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) + "."
                for k in range(per_source)] for _ in sources]
    return sources, outputs


def expected_scores(yaml_path: Path, cfg: LoadConfig, sources, outputs) -> dict[tuple[int, int], tuple[float, float]]:
    """In-process (value, reward) of every pool item: the config's reward for the requested aspect
    and method, computed by the same code the server runs (judge_reward.reward)."""
    from tqdm.auto import tqdm

    from judge_reward.judge import Judge
    from judge_reward.methods.base import Item
    from judge_reward.reward import Reward, RewardConfig

    judge = Judge.from_config(yaml_path)
    reward = Reward(judge, RewardConfig.from_dict({**(judge.config.reward or {}), "aspects": [cfg.aspect],
                                                   "method": cfg.method}))
    table = {}
    with tqdm(total=sum(map(len, outputs)), desc="in-process scores", unit="item") as bar:
        for s, source in enumerate(sources):
            for lo in range(0, len(outputs[s]), 64):
                chunk = outputs[s][lo:lo + 64]
                for k, res in enumerate(reward([Item(o, source) for o in chunk])):
                    table[(s, lo + k)] = (res.scores[cfg.aspect].value, res.value)
                bar.update(len(chunk))
    return table


def server_options(cfg: LoadConfig) -> list[str]:
    return (["--max-batch-size", str(cfg.max_batch_size), "--max-wait-ms", str(cfg.max_wait_ms), "--log-level", "warning"]
            + (["--torch-threads", str(cfg.torch_threads)] if cfg.torch_threads else []))


def parse_metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


async def drive(urls: list[str], cfg: LoadConfig, sources, outputs, expected, report: LoadReport, bar,
                stop_one=None) -> list[float]:
    latencies: list[float] = []
    batch_seen: list[int] = []
    # one keep-alive connection per client and replica, as the benchmark had before it used the client
    limits = httpx.Limits(max_connections=cfg.clients * len(urls), max_keepalive_connections=cfg.clients * len(urls))
    http = JudgeServiceClient(ServiceRewardConfig(urls=urls, retries=cfg.retries, timeout_s=cfg.timeout_s,
                                                  backoff_s=0.2, max_backoff_s=5.0, extra={"limits": limits}))
    stop_after = int(cfg.stop_one_at * cfg.clients * cfg.requests) if stop_one is not None else 0
    done = 0
    try:

        async def client(c: int):
            nonlocal done
            rng = random.Random(cfg.seed * 7919 + c)
            for j in range(cfg.requests):
                s = rng.randrange(len(sources))
                picks = rng.sample(range(len(outputs[s])), min(rng.randint(1, cfg.max_items), len(outputs[s])))
                openrlhf = rng.random() < cfg.openrlhf_share
                if openrlhf:
                    # OpenRLHF sends prompt + response; the service cuts the response out again.
                    prompt = sources[s]
                    body = {"query": [prompt + " " + outputs[s][k] + "<|endoftext|>" for k in picks],
                            "prompts": [prompt] * len(picks)}
                    path = "/get_reward"
                else:
                    body = {"items": [{"source": sources[s], "output": outputs[s][k], "id": f"{s}:{k}"} for k in picks],
                            "details": False}
                    path = "/v1/score"
                start = time.perf_counter()
                report.attempted += 1
                done += 1
                if stop_after and done == stop_after:
                    report.stopped_replica_at = done
                    stop_one()
                try:
                    answer = await http.request("POST", path, body)
                except ServiceError as err:
                    report.lost += 1
                    bar.update(1)
                    if err.status is not None:  # an HTTP answer, not a 200
                        latencies.append(time.perf_counter() - start)
                        report.requests += 1
                        report.rejected += err.status == 503
                    report.errors.append(f"client {c} request {j}: {err}")
                    continue
                latencies.append(time.perf_counter() - start)
                report.requests += 1
                report.items += len(picks)
                bar.update(1)
                if not check(answer, openrlhf, s, picks, sources, outputs, expected, cfg):
                    report.mismatched += 1
                    report.errors.append(f"client {c} request {j}: mismatch: {json.dumps(answer)[:300]}")
                    continue
                report.ok += 1
                if not openrlhf:
                    batch_seen.extend(b["items"] for b in answer["batches"])

        await asyncio.gather(*(client(c) for c in range(cfg.clients)))
    finally:
        await http.aclose()
    report.requests_by_replica = [http.requests_by_url[u] for u in urls]
    report.failed_by_replica = [http.failures_by_url[u] for u in urls]
    report.retried = dict(http.retried_by_reason)
    if batch_seen:
        q = statistics.quantiles(batch_seen, n=100, method="inclusive")
        report.batch_items_seen = {"p10": q[9], "p50": q[49], "p90": q[89], "max": max(batch_seen)}
    return latencies


def check(answer, openrlhf, s, picks, sources, outputs, expected, cfg) -> bool:
    want = [expected[(s, k)] for k in picks]
    if openrlhf:
        rewards = answer.get("rewards")
        if not isinstance(rewards, list) or len(rewards) != len(picks) or any(answer["failures"]):
            return False
        return all(abs(r - w[1]) <= cfg.tolerance for r, w in zip(rewards, want))
    results = answer.get("results")
    if not isinstance(results, list) or len(results) != len(picks):
        return False
    for res, k, (value, reward) in zip(results, picks, want):
        got = res["scores"][cfg.aspect]["value"]
        if res["id"] != f"{s}:{k}" or got is None or abs(got - value) > cfg.tolerance:
            return False
        if abs(res["reward"] - reward) > cfg.tolerance:
            return False
    return True


def run(cfg: LoadConfig, workdir: Path | None = None) -> LoadReport:
    from tqdm.auto import tqdm

    report = LoadReport(config=asdict(cfg))
    if cfg.torch_threads:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(workdir or tmp)
        yaml_path = save_tiny_judge(work, cfg)
        sources, outputs = make_pool(cfg)
        expected = expected_scores(yaml_path, cfg, sources, outputs)
        if cfg.stop_one_at and cfg.replicas < 2:
            raise ValueError(f"stop_one_at: {cfg.stop_one_at} needs replicas >= 2 (got {cfg.replicas})")
        with contextlib.ExitStack() as stack:
            servers = [stack.enter_context(serve_in_subprocess(yaml_path, server_options(cfg),
                                                               work / f"server{k}.log", timeout=300, process=True))
                       for k in range(cfg.replicas)]
            urls = [url for url, _ in servers]
            # the last replica is the one stopped: SIGTERM, it drains its in-flight requests and exits
            stop_one = (lambda: servers[-1][1].send_signal(signal.SIGTERM)) if cfg.stop_one_at else None
            total = cfg.clients * cfg.requests
            with tqdm(total=total, desc=f"{cfg.clients} clients", unit="req") as bar:
                start = time.perf_counter()
                latencies = asyncio.run(drive(urls, cfg, sources, outputs, expected, report, bar, stop_one))
                report.seconds = time.perf_counter() - start
            report.lost += total - report.attempted  # requests never sent (a client crashed)
            if stop_one:
                # SIGTERM drains first: wait for the exit, or a still-draining replica would be read below
                servers[-1][1].wait(timeout=60)
            live = urls[:-1] if stop_one else urls
            texts = [httpx.get(u + "/metrics", timeout=10).text for u in live]
        if latencies:
            q = statistics.quantiles(latencies, n=100, method="inclusive")
            report.latency_ms = {"p50": 1e3 * q[49], "p90": 1e3 * q[89], "p99": 1e3 * q[98], "max": 1e3 * max(latencies)}
        report.requests_per_s = report.requests / max(report.seconds, 1e-9)
        report.items_per_s = report.items / max(report.seconds, 1e-9)
        # the stopped replica's /metrics went with it: these are the live replicas' batches
        calls = sum(parse_metric(t, "judge_reward_batch_items_count") for t in texts)
        report.judge_calls = int(calls)
        report.batch_items_mean = sum(parse_metric(t, "judge_reward_batch_items_sum") for t in texts) / max(calls, 1)
        report.batch_requests_mean = sum(parse_metric(t, "judge_reward_batch_requests_sum") for t in texts) / max(calls, 1)
        report.errors = report.errors[:20]
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = LoadConfig()
    for name, value in asdict(defaults).items():
        p.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    p.add_argument("--json", type=Path, help="write the report here too")
    args = vars(p.parse_args(argv))
    out = args.pop("json")
    cfg = LoadConfig(**args)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report = run(cfg)
    text = json.dumps(asdict(report), indent=2)
    print(text)
    if out:
        out.write_text(text + "\n")
    return 0 if report.lost == 0 and report.mismatched == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
