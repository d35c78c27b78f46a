"""Prefix sharing: 8 completions that share a ~600-token document, scored together vs each alone.

Two workloads over the same 8 SummEval summaries of one document:

* GPTScore: every summary token gets a log-probability, so the LM head (Gemma: 262k x 640) runs on
  ~70 positions per summary in both paths; only the transformer body over the document is saved.
* G-Eval form filling: the head runs once per prompt (the score slot), so the shared document is
  most of the work and sharing it saves most of the time.

"Each alone" is the same engine (batched, head on the needed positions only) fed one request per
call; "shared" sends the 8 requests in one call so the document's KV cache is computed once.

    python benchmarks/prefix_sharing.py
    python benchmarks/prefix_sharing.py --dtype float32 --repeats 1   # agreement of the two paths in fp32
"""

from __future__ import annotations

import argparse

from _common import device_line, summeval, timed
from judge_reward import load_aspects
from judge_reward.backends.base import CandidateRequest, ContinuationRequest
from judge_reward.backends.hf import HFBackend, HFBackendConfig
from judge_reward.prompts.geval import build_geval_prompt
from judge_reward.prompts.gptscore import build_gptscore_prompt


def compare(name, backend, requests, call, values, repeats) -> None:
    call(requests[:1])  # warm-up
    fresh = backend.clear_token_memo  # each run tokenises its texts as if new
    t_shared, shared = timed(lambda: call(requests), repeats, fresh)
    t_alone, alone = timed(lambda: [call([r])[0] for r in requests], repeats, fresh)
    diff = max(abs(a - b) for x, y in zip(shared, alone) for a, b in zip(values(x), values(y)))
    prompt_tokens = backend.count_tokens(getattr(requests[0], "context", None) or requests[0].prompt)
    print(f"{name:<9} {prompt_tokens:>6} {t_alone:>10.2f} {t_shared:>10.2f} {t_alone / t_shared:>8.1f}x {diff:>10.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtype", default="auto", help="auto (bf16 on CUDA and where the CPU has it), float32, bfloat16")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each path (median reported)")
    args = parser.parse_args()
    aspect = load_aspects("summeval").get("relevance")
    backend = HFBackend(HFBackendConfig(progress=False, dtype=args.dtype))
    # The first document whose source is at least ~550 tokens (~600 with the instruction).
    doc = next(d for d in summeval(10) if backend.count_tokens(d[0]["source"]) >= 550)[:8]

    gptscore = []
    for r in doc:
        p = build_gptscore_prompt(aspect, r["source"], r["system_output"])
        gptscore.append(ContinuationRequest(p.context, p.continuation, group=p.shared))
    geval = []
    for r in doc:
        # the layout the README row was measured with (the criteria after the judged text, per row)
        p = build_geval_prompt(aspect, r["source"], r["system_output"], aspect.steps, layout="guarded")
        geval.append(CandidateRequest(p.text, aspect.scale.texts, group=p.shared))

    print(f"8 completions sharing one document ({backend.model_id}, {backend.dtype}); medians of {args.repeats} runs; "
          f"{device_line(backend.device)}")
    print(f"{'workload':<9} {'prompt':>6} {'alone s':>10} {'shared s':>10} {'speedup':>9} {'max|diff|':>10}")
    compare("GPTScore", backend, gptscore, backend.continuation_logprobs, lambda r: r.token_logprobs, args.repeats)
    compare("G-Eval", backend, geval, backend.candidate_logprobs, lambda r: r.logprobs, args.repeats)
    print("max|diff|: largest per-token (GPTScore) or per-candidate (G-Eval) log-probability difference, nats")


if __name__ == "__main__":
    main()
