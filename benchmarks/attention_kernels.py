"""CPU attention kernels at judging's shapes: PyTorch's SDPA (flash) kernel vs this project's GEMM kernel.

Shapes are those of Gemma-3 270M (4 query heads, 1 key/value head, head dimension 256) in a GPTScore
run over one SummEval document: the document's prompt as one causal pass (439 tokens), then four
packed token-tree rows of 245 tokens against that cached prefix, under a tree mask. Prints the
median time of each kernel, its rate (QK and PV matmul FLOPs, masked ones included), the ratio, the
largest difference from attention computed in fp32, and a bf16 2048^3 matmul's rate for scale.

    python benchmarks/attention_kernels.py
"""

from __future__ import annotations

import argparse

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from _common import matmul_peak, timed
from judge_reward.backends.cpu_attention import gemm_attention_forward, uses_gemm_kernel

HEADS, KV_HEADS, DIM = 4, 1, 256
SCALING = 256**-0.5  # Gemma-3's query_pre_attn_scalar


class Layer(torch.nn.Module):
    is_causal = True
    num_key_value_groups = HEADS // KV_HEADS


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    return 1e3 * timed(fn, repeats)[0]


def tree_mask(rows: int, width: int, prefix: int, branch: int, gen: torch.Generator) -> torch.Tensor:
    """Each query sees the whole prefix and its ancestors in a row of chains that fork every ``branch``
    tokens on average (a stand-in for a packed token tree)."""
    mask = torch.zeros(rows, 1, width, prefix + width, dtype=torch.bool)
    mask[..., :prefix] = True
    for r in range(rows):
        start = 0
        for j in range(width):
            if j > 0 and torch.rand((), generator=gen) < 1 / branch:
                start = j  # a new branch: what follows no longer sees the previous one
            mask[r, 0, j, prefix + start:prefix + j + 1] = True
    return mask


def fp32_attention(q, k, v, mask):
    group = q.shape[1] // k.shape[1]
    scores = q.float() @ k.float().repeat_interleave(group, 1).transpose(-1, -2) * SCALING
    if mask is None:
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    probs = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
    return (probs @ v.float().repeat_interleave(group, 1)).transpose(1, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    prefix, rows, width = 439, 4, 245
    cases = {
        f"causal prefix ({prefix} tokens)": (1, prefix, prefix, None),
        f"token-tree rows ({rows} x {width} queries, {prefix + width} keys)":
            (rows, width, prefix + width, tree_mask(rows, width, prefix, 60, gen)),
    }
    layer = Layer()
    peak = matmul_peak(torch.bfloat16) / 1e9
    print(f"torch threads {torch.get_num_threads()}; bf16 2048^3 matmul: {peak:.0f} GFLOP/s")
    for name, (batch, q_len, n_keys, mask) in cases.items():
        q = torch.randn(batch, HEADS, q_len, DIM, generator=gen).bfloat16()
        k = torch.randn(batch, KV_HEADS, n_keys, DIM, generator=gen).bfloat16()
        v = torch.randn(batch, KV_HEADS, n_keys, DIM, generator=gen).bfloat16()
        assert uses_gemm_kernel(layer, q, k, mask, 0.0)
        flops = 4 * batch * HEADS * q_len * n_keys * DIM
        expected = fp32_attention(q, k, v, mask)
        print(name)
        times = {}
        for kernel, fn in [("sdpa (flash)", sdpa_attention_forward), ("gemm", gemm_attention_forward)]:
            run = lambda: fn(layer, q, k, v, mask, scaling=SCALING)  # noqa: E731
            times[kernel] = median_ms(run, args.repeats)
            err = (run()[0].float() - expected).abs().max().item()
            print(f"  {kernel:13s} {times[kernel]:7.2f} ms  {flops / times[kernel] / 1e6:5.0f} GFLOP/s"
                  f" ({100 * flops / times[kernel] / 1e6 / peak:3.0f}% of the matmul)  max |diff| vs fp32 {err:.4f}")
        print(f"  gemm is {times['sdpa (flash)'] / times['gemm']:.2f}x faster (median of {args.repeats})")


if __name__ == "__main__":
    main()
