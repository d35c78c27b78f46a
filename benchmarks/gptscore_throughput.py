"""GPTScore throughput: this engine vs a per-sample loop in the style of the official scorer.

Baseline: batch 1, fp32, full-vocabulary logits at every position, one forward pass per summary
(prompt + summary tokenised together, mean log-prob of the summary tokens). Ours: the default
judge (bf16 where the CPU has it, token-budgeted batches, LM head on the scored tokens only,
the article's prompt computed once per document, summaries that open alike packed into token
trees). Same model, same prompts; prints both times (ours: the median of ``--repeats`` runs),
the ratio, and the Spearman correlation between the two sets of scores.

    python benchmarks/gptscore_throughput.py --docs 2
    python benchmarks/gptscore_throughput.py --docs 2 --profile   # plus where our time goes, by operator
    python benchmarks/gptscore_throughput.py --docs 2 --sdpa      # ours with PyTorch's flash attention
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from scipy.stats import spearmanr

from _common import device_line, matmul_peak, summeval
from judge_reward import GPTScore, Item, load_aspects
from judge_reward.backends.hf import HFBackend, HFBackendConfig
from judge_reward.prompts.gptscore import build_gptscore_prompt


def baseline_scores(backend: HFBackend, aspect, items) -> list[float]:
    model = backend.model.float()
    out = []
    for item in items:
        p = build_gptscore_prompt(aspect, item.source, item.output)
        ids, start, _ = backend.split_tokens(p.context, p.continuation)
        with torch.no_grad():
            logits = model(torch.tensor([ids], device=backend.device)).logits[0].float()  # full vocabulary, every position
        logp = torch.log_softmax(logits, -1)
        scored = [logp[t - 1, ids[t]].item() for t in range(start, len(ids))]
        out.append(sum(scored) / len(scored))
    return out


def work_flops(backend: HFBackend, work) -> float:
    """Matmul FLOPs of the work the backend reports: the decoder body over every token column it ran
    (shared prefixes and token-tree tokens once, padding included), the LM head on the rows it read."""
    return sum(backend.flops_per_token[part] * work[part] for part in ("body", "head"))


def baseline_flops(backend: HFBackend, aspect, items) -> float:
    per_token = backend.flops_per_token["body"] + backend.flops_per_token["head"]
    total = 0.0
    for item in items:
        p = build_gptscore_prompt(aspect, item.source, item.output)
        ids, _, _ = backend.split_tokens(p.context, p.continuation)
        total += per_token * len(ids)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=2, help="SummEval documents (16 summaries each)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of ours (the median is reported)")
    parser.add_argument("--profile", action="store_true", help="after the timings, profile one more run of ours by operator")
    parser.add_argument("--sdpa", action="store_true", help="ours with PyTorch's SDPA attention (cpu_gemm_attention off)")
    args = parser.parse_args()
    aspect = load_aspects("summeval").get("coherence")
    items = [Item(r["system_output"], r["source"]) for doc in summeval(args.docs) for r in doc]
    ours = HFBackend(HFBackendConfig(progress=False, cpu_gemm_attention=not args.sdpa))
    print(f"model {ours.model_id}, {len(items)} summaries; {device_line(ours.device)}")
    GPTScore().score(ours, aspect, items[:2])  # warm-up
    times = []
    for _ in range(args.repeats):
        before = ours.work.copy()
        ours.clear_token_memo()  # each run tokenises its texts as if new
        start = time.perf_counter()
        fast = [s.value for s in GPTScore().score(ours, aspect, items)]
        times.append(time.perf_counter() - start)
        work = ours.work - before
    t_ours = statistics.median(times)
    base_backend = HFBackend(HFBackendConfig(dtype="float32", progress=False))
    baseline_scores(base_backend, aspect, items[:1])  # warm-up
    start = time.perf_counter()
    slow = baseline_scores(base_backend, aspect, items)
    t_base = time.perf_counter() - start
    rho = spearmanr(fast, slow).statistic
    flops = work_flops(ours, work)
    print(f"baseline (batch 1, fp32, full logits): {t_base:8.2f} s  {len(items) / t_base:6.2f} summaries/s")
    print(f"judge-reward ({ours.dtype}, batched, head on scored tokens, prefix + token-tree sharing): {t_ours:8.2f} s  "
          f"{len(items) / t_ours:6.2f} summaries/s (median of {args.repeats}: {', '.join(f'{t:.2f}' for t in times)})")
    print(f"work: {work['requested']} requested tokens; the body ran {work['body']} token columns, "
          f"the LM head {work['head']} rows")
    print(f"speedup: {t_base / t_ours:.1f}x   Spearman(ours, baseline) = {rho:.4f}   "
          f"max |diff| = {max(abs(a - b) for a, b in zip(fast, slow)):.4f} nats/token")
    peak = matmul_peak(ours.dtype, ours.device)
    print(f"achieved {flops / t_ours / 1e9:.1f} GFLOP/s of model matmuls vs a {ours.dtype} square matmul at "
          f"{peak / 1e9:.1f} GFLOP/s on this machine ({100 * flops / t_ours / peak:.0f}%); the baseline achieved "
          f"{baseline_flops(base_backend, aspect, items) / t_base / 1e9:.1f} GFLOP/s of (mostly wasted) work")
    if args.profile:
        print_profile(ours, aspect, items)


def print_profile(backend: HFBackend, aspect, items) -> None:
    """One more run of ours under torch.profiler; time per operator family (self CPU time)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        GPTScore().score(backend, aspect, items)
    families = {"matmuls (body linears + LM head)": ("aten::mm", "aten::addmm"),
                "attention (GEMM kernel's bmm + softmax, or SDPA)": ("aten::bmm", "aten::_softmax", "aten::_scaled_dot_product"),
                "exp (LM-head log-sum-exp)": ("aten::exp_",)}
    totals = dict.fromkeys([*families, "everything else"], 0.0)
    for event in prof.key_averages():
        name = next((f for f, prefixes in families.items() if event.key.startswith(prefixes)), "everything else")
        totals[name] += event.self_cpu_time_total / 1e6
    whole = sum(totals.values())
    print(f"profile of one run ({whole:.2f} s of operator time under the profiler):")
    for name, seconds in totals.items():
        print(f"  {name:50s} {seconds:6.2f} s  {100 * seconds / whole:4.0f}%")


if __name__ == "__main__":
    main()
