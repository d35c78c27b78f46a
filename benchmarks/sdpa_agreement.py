"""Do the judge's log-probabilities on a GPU match the CPU's fp32 ones, per attention kernel and dtype?

The prefix-sharing workload (8 SummEval summaries of one ~600-token article; G-Eval candidate
log-probabilities in the ``guarded`` layout, 896 tokens, and GPTScore token log-probabilities, 627
tokens), each row scored alone and all rows shared, on ``--device`` in fp32 and bf16, with token
trees on and off, under the backend's own kernel choice and under each SDPA kernel forced. Prints
the largest difference from the CPU fp32 rows scored alone, in nats ("ERR": PyTorch has no such
kernel for these inputs).

    python benchmarks/sdpa_agreement.py                 # on CUDA (~2 min on an H200, with the CPU reference)
    python benchmarks/sdpa_agreement.py --device cpu    # the CPU's own kernels (~15 min on 2 cores)
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from _common import device_line, summeval
from judge_reward import load_aspects
from judge_reward.backends.base import CandidateRequest, ContinuationRequest
from judge_reward.backends.hf import HFBackend, HFBackendConfig
from judge_reward.prompts.geval import build_geval_prompt
from judge_reward.prompts.gptscore import build_gptscore_prompt

KERNELS = {"backend": None, "math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
           "cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def values(results) -> list[float]:
    return [v for r in results for v in (getattr(r, "logprobs", None) or r.token_logprobs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    aspect = load_aspects("summeval").get("relevance")
    reference = HFBackend(HFBackendConfig(progress=False, dtype="float32", device="cpu"))
    doc = next(d for d in summeval(10) if reference.count_tokens(d[0]["source"]) >= 550)[:8]
    workloads = {"geval": [], "gptscore": []}
    for r in doc:
        p = build_geval_prompt(aspect, r["source"], r["system_output"], aspect.steps, layout="guarded")
        workloads["geval"].append(CandidateRequest(p.text, aspect.scale.texts, group=p.shared))
        q = build_gptscore_prompt(aspect, r["source"], r["system_output"])
        workloads["gptscore"].append(ContinuationRequest(q.context, q.continuation, group=q.shared))
    call = {"geval": "candidate_logprobs", "gptscore": "continuation_logprobs"}
    expected = {name: values([getattr(reference, call[name])([x])[0] for x in reqs]) for name, reqs in workloads.items()}
    print(f"reference: CPU fp32, each row alone; {device_line(args.device)}")
    kernels = KERNELS if torch.device(args.device).type == "cuda" else {k: KERNELS[k] for k in ("backend", "math")}
    for dtype in ("float32", "bfloat16"):
        for trees in (True, False):
            backend = HFBackend(HFBackendConfig(progress=False, dtype=dtype, device=args.device, tree_sharing=trees,
                                                cpu_gemm_attention=False))
            for kernel_name, kernel in kernels.items():
                cells = []
                for name, reqs in workloads.items():
                    score = getattr(backend, call[name])
                    for shared in (False, True):
                        label = f"{name} {'shared' if shared else 'alone'}"
                        try:
                            with sdpa_kernel(kernel) if kernel is not None else nullcontext():
                                got = values(score(reqs) if shared else [score([x])[0] for x in reqs])
                            cells.append(f"{label} {max(abs(a - b) for a, b in zip(got, expected[name])):.4f}")
                        except RuntimeError as err:
                            cells.append(f"{label} ERR ({str(err).splitlines()[0][:40]})")
                print(f"{dtype:8s} trees={'on ' if trees else 'off'} {kernel_name:9s} | " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
