"""Prefix sharing: 8 completions that share a ~600-token document, scored together vs each alone.

    python benchmarks/prefix_sharing.py
"""

from __future__ import annotations

from _common import summeval, timed
from judge_reward.backends.base import ContinuationRequest
from judge_reward.backends.hf import HFBackend, HFBackendConfig
from judge_reward.prompts.gptscore import build_gptscore_prompt
from judge_reward import load_aspects


def main() -> None:
    aspect = load_aspects("summeval").get("relevance")
    docs = summeval(10)
    backend = HFBackend(HFBackendConfig(progress=False))
    # The first document whose prompt is at least ~600 tokens.
    doc = next(d for d in docs if backend.count_tokens(d[0]["source"]) >= 550)
    requests = []
    for r in doc[:8]:
        p = build_gptscore_prompt(aspect, r["source"], r["system_output"])
        requests.append(ContinuationRequest(p.context, p.continuation, group=p.shared))
    context_tokens = backend.count_tokens(requests[0].context)
    backend.continuation_logprobs(requests[:1])  # warm-up
    t_shared, shared = timed(lambda: backend.continuation_logprobs(requests))
    t_alone, alone = timed(lambda: [backend.continuation_logprobs([r])[0] for r in requests])
    diff = max(abs(a - b) for x, y in zip(shared, alone) for a, b in zip(x.token_logprobs, y.token_logprobs))
    print(f"8 completions sharing a {context_tokens}-token prompt ({backend.dtype}), medians of 3 runs")
    print(f"each alone: {t_alone:.2f} s   shared prefix: {t_shared:.2f} s   speedup {t_alone / t_shared:.1f}x   "
          f"max |diff| {diff:.4f}")


if __name__ == "__main__":
    main()
