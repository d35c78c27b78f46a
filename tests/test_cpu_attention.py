"""The CPU GEMM attention kernel: same outputs as attention in fp32, SDPA wherever it does not apply,
and the HF backend's numbers unchanged (within bf16 rounding) when it is switched on."""

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from judge_reward.backends import cpu_attention
from judge_reward.backends.base import ContinuationRequest
from judge_reward.backends.cpu_attention import gemm_attention_forward, uses_gemm_kernel
from tiny_models import make_backend

from test_hf_backend import TREE_HYPOS, continuation_scores


class Layer(torch.nn.Module):
    is_causal = True
    training = False

    def __init__(self, heads, kv_heads):
        super().__init__()
        self.num_key_value_groups = heads // kv_heads


def reference(query, key, value, mask, scaling, softcap=None):
    """Attention in fp32, written out: (batch, q, heads, dim)."""
    group = query.shape[1] // key.shape[1]
    k = key.float().repeat_interleave(group, 1)
    v = value.float().repeat_interleave(group, 1)
    scores = query.float() @ k.transpose(-1, -2) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if mask is None:
        mask = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return (torch.softmax(scores, -1).nan_to_num() @ v).transpose(1, 2)


def inputs(batch=3, heads=4, kv_heads=2, q_len=9, n_keys=14, dim=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, q_len, dim, generator=g).bfloat16()
    k = torch.randn(batch, kv_heads, n_keys, dim, generator=g).bfloat16()
    v = torch.randn(batch, kv_heads, n_keys, dim, generator=g).bfloat16()
    return q, k, v


@pytest.mark.parametrize("mask_heads", [1, 4])
@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_matches_fp32_attention_for_boolean_masks(kv_heads, mask_heads):
    q, k, v = inputs(kv_heads=kv_heads)
    g = torch.Generator().manual_seed(1)
    mask = torch.rand(3, mask_heads, 9, 14, generator=g) > 0.4
    mask[..., 0] = True  # every query sees a key: a fully masked row is tested on its own below
    assert uses_gemm_kernel(Layer(4, kv_heads), q, k, mask, 0.0)
    out, _ = gemm_attention_forward(Layer(4, kv_heads), q, k, v, mask, scaling=0.25)
    expected = reference(q, k, v, mask, 0.25)
    assert out.shape == expected.shape == (3, 9, 4, 16)
    assert (out.float() - expected).abs().max() < 0.03  # bf16 scores and probabilities
    sdpa, _ = sdpa_attention_forward(Layer(4, kv_heads), q, k, v, mask, scaling=0.25)
    assert (out.float() - sdpa.float()).abs().max() < 0.03


def test_a_mask_shared_by_the_batch_and_the_causal_pass():
    q, k, v = inputs(q_len=14)
    shared = torch.rand(1, 1, 14, 14, generator=torch.Generator().manual_seed(2)) > 0.3
    shared[..., 0] = True
    out, _ = gemm_attention_forward(Layer(4, 2), q, k, v, shared, scaling=0.25)
    assert (out.float() - reference(q, k, v, shared, 0.25)).abs().max() < 0.03
    causal, _ = gemm_attention_forward(Layer(4, 2), q, k, v, None, scaling=0.25)  # no mask: a causal pass
    assert (causal.float() - reference(q, k, v, None, 0.25)).abs().max() < 0.03


def test_softcap_is_applied_before_the_mask():
    q, k, v = inputs()
    q = q * 4  # large scores, so the cap matters
    mask = torch.ones(3, 1, 9, 14, dtype=torch.bool)
    out, _ = gemm_attention_forward(Layer(4, 2), q, k, v, mask, scaling=0.25, softcap=2.0)
    assert (out.float() - reference(q, k, v, mask, 0.25, softcap=2.0)).abs().max() < 0.03
    assert (out.float() - reference(q, k, v, mask, 0.25)).abs().max() > 0.1


def test_a_fully_masked_query_gets_finite_output():
    """A padding query that sees no key must not turn NaN: in the next layer its key and value would
    reach real queries through P V (a zero weight times NaN is NaN)."""
    q, k, v = inputs()
    mask = torch.rand(3, 1, 9, 14, generator=torch.Generator().manual_seed(4)) > 0.3
    mask[..., 0] = True
    mask[0, :, 3] = False  # query 3 of row 0 sees nothing
    out, _ = gemm_attention_forward(Layer(4, 2), q, k, v, mask, scaling=0.25)
    assert torch.isfinite(out).all()
    real = torch.ones(3, 9, dtype=torch.bool)
    real[0, 3] = False
    assert (out[real].float() - reference(q, k, v, mask, 0.25)[real]).abs().max() < 0.03


@pytest.mark.parametrize("case", ["float32", "one query", "dropout", "too big", "cached causal", "float mask"])
def test_everything_else_goes_to_sdpa_unchanged(case, monkeypatch):
    q, k, v = inputs()
    mask = torch.rand(3, 1, 9, 14, generator=torch.Generator().manual_seed(3)) > 0.3
    mask[..., 0] = True
    dropout = 0.0
    if case == "float32":
        q, k, v = q.float(), k.float(), v.float()
    elif case == "one query":
        q, mask = q[:, :, :1], mask[:, :, :1]
    elif case == "dropout":
        dropout = 0.1
    elif case == "too big":
        monkeypatch.setattr(cpu_attention, "MAX_SCORE_ELEMENTS", 3 * 4 * 9 * 14 - 1)
    elif case == "cached causal":
        mask = None  # 9 queries after 5 cached keys: not the plain causal pass the kernel takes
    elif case == "float mask":
        mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill_(~mask, float("-inf"))
    layer = Layer(4, 2)
    assert not uses_gemm_kernel(layer, q, k, mask, dropout)
    torch.manual_seed(0)
    out, _ = gemm_attention_forward(layer, q, k, v, mask, dropout=dropout, scaling=0.25)
    torch.manual_seed(0)
    expected, _ = sdpa_attention_forward(layer, q, k, v, mask, dropout=dropout, scaling=0.25)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])  # gemma3: sliding-window and full layers, tree masks for both
def test_backend_numbers_agree_with_sdpa_in_bf16(arch, monkeypatch):
    common = dict(model_dtype=torch.bfloat16, dtype="bfloat16", min_shared_tokens=4, tree_min_shared=4)
    gemm = make_backend("char", arch, **common)
    sdpa = make_backend("char", arch, cpu_gemm_attention=False, **common)
    assert gemm.model.config._attn_implementation == cpu_attention.NAME
    assert sdpa.model.config._attn_implementation == "sdpa"
    assert gemm._tree_layout == sdpa._tree_layout is not None
    taken = []  # per attention call: did the kernel compute it (True) or hand it to SDPA
    decide = cpu_attention.uses_gemm_kernel
    monkeypatch.setattr(cpu_attention, "uses_gemm_kernel", lambda *a: taken.append(decide(*a)) or taken[-1])
    context = "Article: The council met on Tuesday to discuss the budget.\n\nTL;DR:"
    requests = [ContinuationRequest(context, h, group="doc") for h in TREE_HYPOS]
    ours, theirs = continuation_scores(gemm, requests), continuation_scores(sdpa, requests)
    assert taken.count(True) >= 2 * len(gemm.body.layers)  # the prefix (causal) and the tree rows
    for x, y in zip(ours, theirs):
        assert len(x) == len(y)
        assert max(abs(p - q) for p, q in zip(x, y)) < 0.15  # bf16 (tiny random model, sharp head)
    flat = [ContinuationRequest(context, h) for h in TREE_HYPOS]  # padded batches, no prefix cache
    for x, y in zip(continuation_scores(gemm, flat), continuation_scores(sdpa, flat)):
        assert max(abs(p - q) for p, q in zip(x, y)) < 0.15


def test_backend_keeps_sdpa_in_float32_and_when_switched_off():
    assert make_backend("char").model.config._attn_implementation == "sdpa"
    off = make_backend("char", model_dtype=torch.bfloat16, dtype="bfloat16", cpu_gemm_attention=False)
    assert off.model.config._attn_implementation == "sdpa"
    eager = make_backend("char", model_dtype=torch.bfloat16, dtype="bfloat16", attn_implementation="eager")
    assert eager.model.config._attn_implementation == "eager"  # a choice the user made is kept


def test_generation_runs_through_the_kernel_in_bf16(monkeypatch):
    """Sampling (G-Eval's n=20 mode) prefills through the kernel and decodes one token at a time via SDPA."""
    from judge_reward.backends.base import GenerationRequest

    backend = make_backend("char", model_dtype=torch.bfloat16, dtype="bfloat16")
    taken = []
    decide = cpu_attention.uses_gemm_kernel
    monkeypatch.setattr(cpu_attention, "uses_gemm_kernel", lambda *a: taken.append(decide(*a)) or taken[-1])
    [gen] = backend.generate([GenerationRequest("Rating:", n=3, temperature=1.0, max_new_tokens=6, seed=1)])
    assert gen.error is None and len(gen.texts) == 3
    assert True in taken and False in taken
