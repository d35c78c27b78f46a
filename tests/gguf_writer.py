"""Writing a Llama model and its byte-level BPE tokenizer as a GGUF file, the way llama.cpp does.

Only what the GGUF loading tests need: F32 tensors under llama.cpp's tensor names, the ``llama.*``
hyper-parameters and the ``tokenizer.ggml.*`` vocabulary that transformers reads back, and the
rotary q/k row permutation that llama.cpp's ``convert_hf_to_gguf.py`` applies (``LlamaModel.permute``)
and transformers' ``LlamaTensorProcessor`` reverses on load.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def permute_qk(weight: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """llama.cpp's q/k permutation: each head's rotary halves interleaved into (real, imag) pairs.

    Copied from ``LlamaModel.permute`` in llama.cpp's ``convert_hf_to_gguf.py``.
    """
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (
        weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def _tokenizer_metadata(tokenizer) -> dict:
    """Vocabulary, token types and merges of a byte-level BPE ``PreTrainedTokenizerFast``."""
    import gguf

    state = json.loads(tokenizer.backend_tokenizer.to_str())
    model = state["model"]
    if model["type"] != "BPE":
        raise ValueError(f"tokenizer: only byte-level BPE is written, got {model['type']}")
    by_id = {i: t for t, i in tokenizer.get_vocab().items()}
    if sorted(by_id) != list(range(len(by_id))):
        raise ValueError("tokenizer: vocabulary ids are not contiguous")
    tokens = [by_id[i] for i in range(len(by_id))]
    special = set(tokenizer.all_special_tokens) | {
        t["content"] for t in state.get("added_tokens", []) if t.get("special")
    }
    types = [int(gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL) for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return {"tokens": tokens, "types": types, "merges": merges}


def write_llama_gguf(path: Path | str, model, tokenizer, *, add_bos: bool | None = None) -> Path:
    """Write ``model`` (a ``LlamaForCausalLM``) and ``tokenizer`` to ``path`` as an F32 GGUF file."""
    import gguf

    path = Path(path)
    cfg = model.config
    n_head, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_head
    rope_theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta") or getattr(cfg, "rope_theta", 10000.0)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-random-llama")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(rope_theta))
    writer.add_layer_norm_rms_eps(float(cfg.rms_norm_eps))
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    vocab = _tokenizer_metadata(tokenizer)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(vocab["tokens"])
    writer.add_token_types(vocab["types"])
    writer.add_token_merges(vocab["merges"])
    for token_id, add in (
        (tokenizer.bos_token_id, writer.add_bos_token_id),
        (tokenizer.eos_token_id, writer.add_eos_token_id),
        (tokenizer.unk_token_id, writer.add_unk_token_id),
        (tokenizer.pad_token_id, writer.add_pad_token_id),
    ):
        if token_id is not None:
            add(token_id)
    writer.add_add_bos_token(tokenizer.bos_token_id is not None if add_bos is None else add_bos)

    state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    tensors = {
        "token_embd.weight": state["model.embed_tokens.weight"],
        "output_norm.weight": state["model.norm.weight"],
    }
    if not cfg.tie_word_embeddings:
        tensors["output.weight"] = state["lm_head.weight"]
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        tensors |= {
            f"blk.{i}.attn_norm.weight": state[p + "input_layernorm.weight"],
            f"blk.{i}.attn_q.weight": permute_qk(state[p + "self_attn.q_proj.weight"], n_head, n_head),
            f"blk.{i}.attn_k.weight": permute_qk(state[p + "self_attn.k_proj.weight"], n_head, n_kv),
            f"blk.{i}.attn_v.weight": state[p + "self_attn.v_proj.weight"],
            f"blk.{i}.attn_output.weight": state[p + "self_attn.o_proj.weight"],
            f"blk.{i}.ffn_norm.weight": state[p + "post_attention_layernorm.weight"],
            f"blk.{i}.ffn_gate.weight": state[p + "mlp.gate_proj.weight"],
            f"blk.{i}.ffn_up.weight": state[p + "mlp.up_proj.weight"],
            f"blk.{i}.ffn_down.weight": state[p + "mlp.down_proj.weight"],
        }
    for name, array in tensors.items():
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
