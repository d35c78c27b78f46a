"""Attention as batched GEMMs, for bf16/fp16 judges on a CPU.

Why: PyTorch's CPU flash-attention kernel runs Gemma-3's attention (head dimension 256) at about
150 GFLOP/s in bf16 on this project's 2-core AVX-512 machine, where a bf16 batched matmul of the
same work runs at about 400. Judging sends hundreds of query tokens at a time against a long
cached prefix (a document, then token trees of summaries), so attention is a fifth of a GPTScore
run. Here it is three calls: scores = Q K^T (query heads that share a key/value head folded into
the query rows, so keys are read once per group and never copied), mask added in place, softmax
(accumulated in fp32), then P V. ``python benchmarks/attention_kernels.py`` times both kernels and
prints their errors against fp32 attention.

Numerics are those of transformers' eager attention: scores rounded to the model dtype, softmax
accumulated in fp32, probabilities in the model dtype.

The kernel is used only where it wins and its memory stays bounded: a CPU tensor in bf16/fp16,
more than one query token, a boolean mask (padding or token-tree masks) or none in a causal pass,
and a score tensor of at most :data:`MAX_SCORE_ELEMENTS`. Every other call goes to transformers' SDPA path
unchanged, so the kernel takes the masks transformers builds for SDPA.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

NAME = "judge_reward_cpu_gemm"
"""The ``attn_implementation`` name this kernel is registered under in transformers."""

MAX_SCORE_ELEMENTS = 1 << 25
"""Largest score tensor (batch x heads x queries x keys) the kernel builds: 64 MB in bf16, and as
much again for the probabilities. Bigger calls (one very long sequence) go to SDPA, which never
holds all scores at once."""

_additive_masks: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``mask`` (True = attend) as 0 / the dtype's lowest finite value, as eager attention adds it: a
    query with every key masked (padding) gets finite uniform weights, never NaN that a zero weight
    would carry into real tokens through P V. Every layer of a forward pass gets the same mask
    object for its layer type, so the conversion is kept for the last few masks seen."""
    hit = _additive_masks.get(id(mask))
    if hit is not None and hit[0] is mask and hit[1].dtype == dtype:
        return hit[1]
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)
    if len(_additive_masks) >= 4:
        _additive_masks.clear()
    _additive_masks[id(mask)] = (mask, additive)
    return additive


def uses_gemm_kernel(module, query: torch.Tensor, key: torch.Tensor, attention_mask: torch.Tensor | None,
                     dropout: float) -> bool:
    """Whether :func:`gemm_attention_forward` computes this call itself (else it goes to SDPA)."""
    batch, heads, q_len, _ = query.shape
    n_keys = key.shape[2]
    if attention_mask is None:  # transformers leaves the mask out of a plain causal pass (a prefix)
        mask_ok = getattr(module, "is_causal", True) and q_len == n_keys
    else:
        mask_ok = (attention_mask.dtype == torch.bool and attention_mask.dim() == 4
                   and attention_mask.shape[0] in (1, batch) and attention_mask.shape[1] in (1, heads)
                   and attention_mask.shape[2:] == (q_len, n_keys))
    return (
        mask_ok
        and query.device.type == "cpu"
        and query.dtype in (torch.bfloat16, torch.float16)
        and q_len > 1
        and heads % key.shape[1] == 0
        and not dropout
        and batch * heads * q_len * n_keys <= MAX_SCORE_ELEMENTS
    )


def gemm_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    softcap: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention-interface function: query (batch, heads, q, dim), key and value
    (batch, kv heads, keys, dim), boolean mask (batch or 1, heads or 1, q, keys) or None for a
    causal pass; returns (batch, q, heads, dim) like every attention function."""
    if not uses_gemm_kernel(module, query, key, attention_mask, dropout):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, softcap=softcap, **kwargs
        )
    batch, heads, q_len, dim = query.shape
    kv_heads, n_keys = key.shape[1], key.shape[2]
    group = heads // kv_heads
    if scaling is None:
        scaling = dim**-0.5
    # Query head h uses key/value head h // group: fold each group's heads into its query rows.
    q = (query * scaling).reshape(batch * kv_heads, group * q_len, dim)
    scores = torch.bmm(q, key.reshape(batch * kv_heads, n_keys, dim).transpose(1, 2))
    grouped = scores.view(batch, kv_heads, group, q_len, n_keys)
    if softcap is not None:
        grouped.div_(softcap).tanh_().mul_(softcap)
    if attention_mask is None:
        grouped.add_(torch.full((q_len, n_keys), torch.finfo(scores.dtype).min, dtype=scores.dtype).triu_(1))
    else:
        mask = _additive(attention_mask, scores.dtype)
        if mask.shape[1] == 1:  # one mask for all heads: broadcast, never expanded
            grouped.add_(mask[:, :, None])
        else:
            grouped.add_(mask.view(mask.shape[0], kv_heads, group, q_len, n_keys))
    probs = torch.softmax(scores, dim=-1)  # accumulates in fp32 for bf16/fp16 input on a CPU
    out = torch.bmm(probs, value.reshape(batch * kv_heads, n_keys, dim))
    return out.view(batch, heads, q_len, dim).transpose(1, 2), None


AttentionInterface.register(NAME, gemm_attention_forward)
ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)  # the masks SDPA takes: boolean, 4-D
