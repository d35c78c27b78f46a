"""verl's reward loop through the service vs one in-process ``Judge.score``; two replicas vs one.

Part 1, the reward loop: a rollout batch of ``--prompts`` x ``--group`` samples (completions of a
prompt share its source) is split into ``--workers`` contiguous chunks, as verl's
``RewardLoopManager`` splits it over its reward-loop workers (8 by default). Each worker is a
thread with its own long-lived event loop (a verl worker is a Ray actor with one) that calls
:func:`judge_reward.trainers.verl.compute_score_async` for every sample of its chunk at once; the
service (``judge-reward serve``, a subprocess on loopback) batches the concurrent per-sample calls.
The baseline is one in-process ``Judge.score`` call on the same samples, in this process, with the
same torch threads as the server. Every service score is checked against the in-process reward.

Part 2, replicas: a fixed load (``--clients`` concurrent clients x ``--requests`` requests of
1..4 samples, benchmarks/service_load.py's driver, every answer checked against its own items) is
sent through the project's client to one replica, then spread over two, alternately, on the same
two servers; then one of the two is stopped (SIGTERM: it drains, then exits) half-way through a
last run, and the client's retries move its share to the other: nothing may be lost.

Printed: medians [min-max] over ``--repeats`` timed runs (after one warm-up of each), and the ratios
against the baselines measured in the same run. The judge is the test suite's tiny random Llama
(``service_load.save_tiny_judge``), so the figures measure the reward path's overhead and batching
on this machine's CPU, not a real judge's cost.

Usage::

    python benchmarks/verl_reward_loop.py                  # 32 x 8 samples, 8 workers, 5 repeats
    python benchmarks/verl_reward_loop.py --repeats 3 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from _common import median_range, serve_in_subprocess  # noqa: E402
from service_load import LoadConfig, LoadReport, drive, expected_scores, make_pool, save_tiny_judge, server_options  # noqa: E402


@dataclass
class LoopConfig:
    prompts: int = 32
    group: int = 8
    """Completions per prompt (GRPO's G)."""
    workers: int = 8
    """verl's reward.num_workers (its default is 8)."""
    repeats: int = 5
    clients: int = 16
    """Part 2: concurrent clients."""
    requests: int = 40
    """Part 2: requests per client and run."""
    max_wait_ms: float = 10.0
    torch_threads: int = 1
    seed: int = 0


@dataclass
class Result:
    config: dict
    samples: int = 0
    in_process_s: list = field(default_factory=list)
    service_s: list = field(default_factory=list)
    max_abs_diff: float = 0.0
    """Largest |service score - in-process reward| over all samples (all are judged)."""
    not_ok: int = 0
    """Samples the service path flagged (judge_ok = 0); must be 0."""
    one_replica_s: list = field(default_factory=list)
    two_replicas_s: list = field(default_factory=list)
    lost: dict = field(default_factory=dict)
    """Requests lost per part-2 scenario (all runs together); must be all 0."""
    mismatched: dict = field(default_factory=dict)
    two_replicas_share: list = field(default_factory=list)
    """Attempts per replica in the two-replica runs, all runs together."""
    stopped: dict = field(default_factory=dict)
    """The run with one replica stopped half-way: its report's essentials."""


class Worker:
    """One reward-loop worker: a thread running its own event loop for as long as the benchmark."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def submit(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def reward_loop(workers: list[Worker], samples: list[dict], url: str, aspect: str, method: str) -> list[dict]:
    """verl's compute_rm_score: contiguous chunks, one per worker, each worker's samples at once."""
    from judge_reward.trainers.verl import compute_score_async

    size = -(-len(samples) // len(workers))
    chunks = [samples[k * size:(k + 1) * size] for k in range(len(workers))]

    async def chunk_scores(chunk):
        return await asyncio.gather(*(compute_score_async(
            data_source="news", solution_str=s["output"], ground_truth=None, extra_info={"source": s["source"]},
            urls=url, aspects=[aspect], method=method) for s in chunk))

    futures = [w.submit(chunk_scores(c)) for w, c in zip(workers, chunks)]
    return [r for f in futures for r in f.result()]


def run(cfg: LoopConfig, workdir: Path | None = None) -> Result:
    import torch

    from judge_reward.judge import Judge
    from judge_reward.methods.base import Item
    from judge_reward.reward import Reward, RewardConfig

    result = Result(config=asdict(cfg))
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    load = LoadConfig(clients=cfg.clients, requests=cfg.requests, unique=256, sources=8, max_items=4,
                      max_batch_size=256, max_wait_ms=cfg.max_wait_ms, torch_threads=cfg.torch_threads,
                      seed=cfg.seed, retries=3)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(workdir or tmp)
        yaml_path = save_tiny_judge(work, load)
        # Part 1's samples: prompts x group completions, one source per prompt.
        sources, outputs = make_pool(LoadConfig(unique=cfg.prompts * cfg.group, sources=cfg.prompts, seed=cfg.seed))
        samples = [{"source": src, "output": out} for src, outs in zip(sources, outputs) for out in outs[:cfg.group]]
        items = [Item(s["output"], s["source"]) for s in samples]
        result.samples = len(samples)
        judge = Judge.from_config(yaml_path)
        reward = Reward(judge, RewardConfig.from_dict({**(judge.config.reward or {}), "aspects": [load.aspect],
                                                       "method": load.method}))
        want = [r.value for r in reward(items)]
        # Part 2's pool and its in-process scores (every answer is checked against them).
        pool_sources, pool_outputs = make_pool(load)
        expected = expected_scores(yaml_path, load, pool_sources, pool_outputs)

        with contextlib.ExitStack() as stack:
            servers = [stack.enter_context(serve_in_subprocess(yaml_path, server_options(load), work / f"server{k}.log",
                                                               timeout=300, process=True)) for k in range(2)]
            urls = [u for u, _ in servers]
            workers = [Worker() for _ in range(cfg.workers)]
            try:
                # -- part 1: the reward loop vs one in-process Judge.score call, alternately -------------
                for rep in range(cfg.repeats + 1):  # run 0 warms both up and is not counted
                    start = time.perf_counter()
                    judge.score(items, aspects=[load.aspect], method=load.method)
                    t_in = time.perf_counter() - start
                    start = time.perf_counter()
                    got = reward_loop(workers, samples, urls[0], load.aspect, load.method)
                    t_svc = time.perf_counter() - start
                    if rep:
                        result.in_process_s.append(t_in)
                        result.service_s.append(t_svc)
                    result.not_ok += sum(g["judge_ok"] != 1.0 for g in got)
                    result.max_abs_diff = max(result.max_abs_diff, max(abs(g["score"] - w) for g, w in zip(got, want)))
            finally:
                for w in workers:
                    w.stop()

            # -- part 2: the same fixed load on one replica, then spread over two, alternately --------
            share = [0, 0]
            for rep in range(cfg.repeats + 1):
                for name, targets in (("one", urls[:1]), ("two", urls)):
                    report = LoadReport(config=asdict(load))
                    start = time.perf_counter()
                    asyncio.run(drive(targets, load, pool_sources, pool_outputs, expected, report, _NoBar()))
                    seconds = time.perf_counter() - start
                    result.lost[name] = result.lost.get(name, 0) + report.lost + (load.clients * load.requests
                                                                                  - report.attempted)
                    result.mismatched[name] = result.mismatched.get(name, 0) + report.mismatched
                    if rep:
                        (result.one_replica_s if name == "one" else result.two_replicas_s).append(seconds)
                        if name == "two":
                            share = [a + b for a, b in zip(share, report.requests_by_replica)]
            result.two_replicas_share = share
            # -- a last run over two replicas, one of which is stopped half-way --------------------------
            stop_cfg = LoadConfig(**{**asdict(load), "stop_one_at": 0.5})
            report = LoadReport(config=asdict(stop_cfg))
            start = time.perf_counter()
            asyncio.run(drive(urls, stop_cfg, pool_sources, pool_outputs, expected, report, _NoBar(),
                              lambda: servers[1][1].send_signal(signal.SIGTERM)))
            result.stopped = {"seconds": time.perf_counter() - start, "requests": stop_cfg.clients * stop_cfg.requests,
                              "ok": report.ok, "lost": report.lost, "mismatched": report.mismatched,
                              "stopped_at": report.stopped_replica_at, "requests_by_replica": report.requests_by_replica,
                              "failed_by_replica": report.failed_by_replica, "retried": report.retried,
                              "errors": report.errors[:5]}
    return result


class _NoBar:
    def update(self, n):
        pass


def summary(r: Result) -> str:
    n = r.samples
    ips_in = [n / t for t in r.in_process_s]
    ips_svc = [n / t for t in r.service_s]
    load_items = r.config["clients"] * r.config["requests"]
    ratio = statistics.median(r.in_process_s) / statistics.median(r.service_s)
    scale = statistics.median(r.one_replica_s) / statistics.median(r.two_replicas_s)
    # runs alternate, so each repeat's pair saw about the same load from other jobs on the machine
    paired = [one / two for one, two in zip(r.one_replica_s, r.two_replicas_s)]
    paired_loop = [t_in / t_svc for t_in, t_svc in zip(r.in_process_s, r.service_s)]
    lines = [
        f"part 1: {n} samples ({r.config['prompts']} prompts x {r.config['group']}), {r.config['workers']} reward-loop "
        f"workers, {r.config['repeats']} timed runs each, median [min-max]",
        f"  in-process Judge.score, one call : {median_range(r.in_process_s, 3)} s  = {median_range(ips_in, 0)} samples/s",
        f"  verl loop through the service    : {median_range(r.service_s, 3)} s  = {median_range(ips_svc, 0)} samples/s",
        f"  service / in-process throughput  : {ratio:.2f}x of the medians, {median_range(paired_loop)}x per repeat "
        f"(scores: max |diff| {r.max_abs_diff:.1e}, flagged {r.not_ok})",
        f"part 2: {r.config['clients']} clients x {r.config['requests']} requests of 1-4 samples, median [min-max]",
        f"  one replica    : {median_range(r.one_replica_s, 3)} s  = "
        f"{median_range([load_items / t for t in r.one_replica_s], 0)} requests/s",
        f"  two replicas   : {median_range(r.two_replicas_s, 3)} s  = "
        f"{median_range([load_items / t for t in r.two_replicas_s], 0)} requests/s  "
        f"(attempts per replica {r.two_replicas_share})",
        f"  two / one throughput: {scale:.2f}x of the medians, {median_range(paired)}x per repeat; "
        f"lost {r.lost}, mismatched {r.mismatched}",
        f"  one of two stopped after {r.stopped['stopped_at']} of {r.stopped['requests']} requests: ok {r.stopped['ok']}, "
        f"lost {r.stopped['lost']}, mismatched {r.stopped['mismatched']}, attempts per replica "
        f"{r.stopped['requests_by_replica']}, failed {r.stopped['failed_by_replica']}, retried {r.stopped['retried']}",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, value in asdict(LoopConfig()).items():
        p.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    p.add_argument("--json", type=Path, help="write the raw timings here too")
    p.add_argument("--summary-of", type=Path, help="print the summary of a --json file written earlier; run nothing")
    args = vars(p.parse_args(argv))
    out, earlier = args.pop("json"), args.pop("summary_of")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = Result(**json.loads(earlier.read_text())) if earlier else run(LoopConfig(**args))
    print(summary(result))
    if out:
        out.write_text(json.dumps(asdict(result), indent=2) + "\n")
    ok = (result.not_ok == 0 and not any(result.lost.values()) and not any(result.mismatched.values())
          and result.stopped["lost"] == 0 and result.stopped["mismatched"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
