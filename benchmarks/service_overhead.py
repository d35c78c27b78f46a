"""Service overhead: scoring a batch of 32 through the reward service vs. in-process, same judge.

The judge is ``judge_reward/configs/judges/default.yaml`` (GPTScore with the embedded Gemma 3 270M) with its
judgment cache turned off, so every call really runs the model. The batch is 32 SummEval summaries
(2 articles x 16 systems: the prefix-sharing shape of GRPO groups). Up to three ways through the
service (``--paths``, default ``native``) are timed against ``judge.score(items)`` in this process:

* ``native``: one ``POST /v1/score`` with the 32 items;
* ``openrlhf``: one ``POST /get_reward`` with 32 prompt+response queries;
* ``merged``: 32 concurrent one-item requests, merged by the dynamic batcher into one judge call
  (this one also pays up to ``--max-wait-ms`` of batching wait by design).

The server is ``judge-reward serve`` in a subprocess on loopback. Rounds are interleaved (in-process,
then each service path, per round) so that load from other jobs on the machine hits all of them
alike; medians are reported. Overhead = service median / in-process median - 1 (goal: <= 10%).

Also reported: the service's own share of each request (wall time minus the judge call it ran in,
from the answer's ``batches``), which does not depend on how busy the machine is.

Usage::

    python benchmarks/service_overhead.py [--rounds 3] [--paths native,openrlhf,merged] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import httpx  # noqa: E402
from _common import data_dir, serve_in_subprocess  # noqa: E402


def load_batch(data: Path, docs: int = 2, per_doc: int = 16):
    rows = json.loads((data / "summeval" / "summeval.json").read_text())
    by_doc: dict[str, list[dict]] = {}
    for r in rows:
        by_doc.setdefault(r["doc_id"], []).append(r)
    chosen = [rs[:per_doc] for rs in list(by_doc.values())[:docs]]
    return [(r["source"], r["system_output"]) for rs in chosen for r in rs]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="judge YAML (default: the built-in judge_reward/configs/judges/default.yaml)")
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $JUDGE_REWARD_DATA, ../shared/data)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=0, help="unmeasured rounds first")
    p.add_argument("--paths", default="native", help="comma-separated: native, openrlhf, merged")
    p.add_argument("--max-wait-ms", type=float, default=5.0)
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch threads for both sides (0: torch's default); 1 is steadiest on a shared CPU")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)

    import torch
    import yaml
    from tqdm.auto import tqdm

    from judge_reward.judge import Judge, JudgeConfig
    from judge_reward.methods.base import Item

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    cfg = JudgeConfig.from_yaml(args.config)
    cfg.cache = {"memory": False}  # every call runs the model, on both sides
    cfg.backend["progress"] = False
    pairs = load_batch(data_dir(args.data))
    items = [Item(output, source) for source, output in pairs]
    with tempfile.TemporaryDirectory() as tmp:
        yaml_path = Path(tmp) / "judge.yaml"
        from dataclasses import asdict

        yaml_path.write_text(yaml.safe_dump(asdict(cfg)))
        options = ["--max-batch-size", str(len(items)), "--max-wait-ms", str(args.max_wait_ms), "--log-level", "warning"]
        if args.torch_threads:
            options += ["--torch-threads", str(args.torch_threads)]
        t0 = time.perf_counter()
        judge = Judge(cfg)
        print(f"in-process judge loaded in {time.perf_counter() - t0:.1f}s: {judge.backend.model_id}", file=sys.stderr)
        paths = [x.strip() for x in args.paths.split(",") if x.strip()]
        unknown = sorted(set(paths) - {"native", "openrlhf", "merged"})
        if unknown:
            raise SystemExit(f"--paths: unknown path(s) {unknown}; choose native, openrlhf, merged")
        with serve_in_subprocess(yaml_path, options, Path(tmp) / "server.log") as url:
            result = measure(judge, items, pairs, url, args.rounds, args.warmup, paths, tqdm)
    result.update({"model": judge.backend.model_id, "method": cfg.method, "batch": len(items),
                   "rounds": args.rounds, "warmup": args.warmup, "torch_threads": args.torch_threads or torch.get_num_threads(),
                   "max_wait_ms": args.max_wait_ms})
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


def measure(judge, items, pairs, url, rounds, warmup, paths, tqdm) -> dict:
    native_body = {"items": [{"source": it.source, "output": it.output} for it in items], "details": False}
    # OpenRLHF sends prompt + response; a prompt that ends where the response starts.
    prompts = [source + "\n\nSummary:" for source, _ in pairs]
    openrlhf_body = {"query": [p + " " + o for p, (_, o) in zip(prompts, pairs)], "prompts": prompts}
    times: dict[str, list[float]] = {"in_process": [], **{p: [] for p in paths}}
    judge_seconds: dict[str, list[float]] = {p: [] for p in paths if p != "openrlhf"}
    diffs, merged_sizes = [], []

    async def merged():
        async with httpx.AsyncClient(base_url=url, timeout=3600,
                                     limits=httpx.Limits(max_connections=len(items))) as client:
            await asyncio.gather(*(client.get("/health") for _ in items))  # open the connections first
            start = time.perf_counter()
            answers = await asyncio.gather(*(client.post("/v1/score", json={"items": [row], "details": False})
                                             for row in native_body["items"]))
            elapsed = time.perf_counter() - start
            assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200]
            return elapsed, [a.json()["batches"][0] for a in answers]

    with httpx.Client(base_url=url, timeout=3600) as http:
        for r in tqdm(range(warmup + rounds), desc="rounds", unit="round"):
            keep = r >= warmup
            start = time.perf_counter()
            local = judge.score(items)
            if keep:
                times["in_process"].append(time.perf_counter() - start)
            if "native" in paths:
                start = time.perf_counter()
                resp = http.post("/v1/score", json=native_body)
                elapsed = time.perf_counter() - start
                resp.raise_for_status()
                body = resp.json()
                remote = [res["scores"][a]["value"] for res in body["results"] for a in res["scores"]]
                mine = [s.value for res in local for s in res.values()]
                diffs.append(max(abs(a - b) for a, b in zip(remote, mine)))
                if keep:
                    times["native"].append(elapsed)
                    judge_seconds["native"].append(body["batches"][0]["judge_seconds"])
            if "openrlhf" in paths:
                start = time.perf_counter()
                http.post("/get_reward", json=openrlhf_body).raise_for_status()
                if keep:
                    times["openrlhf"].append(time.perf_counter() - start)
            if "merged" in paths:
                elapsed, batches = asyncio.run(merged())
                if keep:
                    times["merged"].append(elapsed)
                    judge_seconds["merged"].append(batches[0]["judge_seconds"])
                    merged_sizes.extend(b["items"] for b in batches)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["in_process"]
    out = {
        "median_seconds": med,
        "overhead": {k: med[k] / base - 1 for k in paths},
        # Wall time of the request minus the judge call it ran in: HTTP, validation, queueing, JSON.
        "service_only_seconds": {k: statistics.median(t - j for t, j in zip(times[k], judge_seconds[k]))
                                 for k in judge_seconds},
        "all_seconds": times,
        "server_judge_seconds": judge_seconds,
        "max_abs_diff_native_vs_in_process": max(diffs) if diffs else None,
    }
    if merged_sizes:
        out["merged_batch_items"] = {"min": min(merged_sizes), "max": max(merged_sizes)}
    return out


if __name__ == "__main__":
    sys.exit(main())
