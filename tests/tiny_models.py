"""Tiny random judges built in-process (milliseconds each), for tests.

Three tokenizer styles cover the tokenisation accidents the engine must survive:

* ``char``: one token per character, a BOS token (like Gemma: " 1" is two tokens, "10" two);
* ``bpe``: byte-level BPE where the space merges into the next word or digit (" 1" is one token,
  like GPT-2/Llama-3), and no BOS token;
* ``bpe_bos``: the same BPE with a BOS token.

Models are random Llama or Gemma-3 (sliding-window) decoders; scores are meaningless, the
arithmetic is what is tested.
"""

from __future__ import annotations

import string
from functools import lru_cache

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

CORPUS = [
    "The summary is coherent and fluent. Coherence: 1 2 3 4 5 10 100 0",
    "- Coherence: 5\n- Fluency: 3\nRating: 4 Score: 80 out of 100 stars",
    "A cat sat on the mat. The news article reports that the council met on Tuesday.",
    "Evaluation Form (scores ONLY): Consistency: 2 Relevance: 1 naturalness groundedness",
] * 20

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


def _wrap(tok: Tokenizer, bos: bool) -> PreTrainedTokenizerFast:
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", tok.token_to_id("<bos>"))]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        bos_token="<bos>" if bos else None,
    )


@lru_cache(maxsize=None)
def _char_tokenizer() -> Tokenizer:
    chars = sorted(set(string.printable))
    vocab = {t: i for i, t in enumerate(SPECIALS + chars)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok


@lru_cache(maxsize=None)
def _bpe_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def make_tokenizer(style: str) -> PreTrainedTokenizerFast:
    if style == "char":
        return _wrap(Tokenizer.from_str(_char_tokenizer().to_str()), bos=True)
    if style in ("bpe", "bpe_bos"):
        return _wrap(Tokenizer.from_str(_bpe_tokenizer().to_str()), bos=style == "bpe_bos")
    raise ValueError(f"style: unknown tokenizer style {style!r}")


def make_model(tokenizer, arch: str = "llama", seed: int = 0, dtype=torch.float32, attn_implementation: str = "sdpa"):
    from transformers import AutoModelForCausalLM, Gemma3TextConfig, LlamaConfig

    torch.manual_seed(seed)
    vocab = len(tokenizer)
    common = dict(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    if arch == "llama":
        config = LlamaConfig(**common, tie_word_embeddings=False)
    elif arch == "gemma3":
        # A sliding window far shorter than the test prompts exercises the windowed cache layers.
        config = Gemma3TextConfig(**common, head_dim=8, sliding_window=6, layer_types=["sliding_attention", "full_attention"])
    else:
        raise ValueError(f"arch: unknown {arch!r}")
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation).to(dtype).eval()
    # Random init is nearly uniform over the vocabulary; sharpen it so probabilities differ visibly.
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(20.0)
    return model


def make_backend(style: str = "char", arch: str = "llama", seed: int = 0, attn_implementation: str = "sdpa",
                 model_dtype=torch.float32, **config):
    from judge_reward.backends.hf import HFBackend, HFBackendConfig

    tok = make_tokenizer(style)
    model = make_model(tok, arch, seed, dtype=model_dtype, attn_implementation=attn_implementation)
    cfg = HFBackendConfig(device="cpu", progress=False, **config)
    return HFBackend(cfg, model=model, tokenizer=tok, model_id=f"tiny-{style}-{arch}-{seed}")


def save_judge_config(folder, style: str = "bpe", **config):
    """A tiny random judge saved under ``folder`` and a judge YAML (GPTScore, SummEval aspects, plus
    ``config``) pointing at it, for commands that load a judge from a config path; returns the YAML's path."""
    import yaml

    tok = make_tokenizer(style)
    model_dir = folder / "tiny-judge"
    make_model(tok, "llama", seed=0).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    raw = {
        "backend": {"kind": "hf", "model": str(model_dir), "device": "cpu", "dtype": "float32", "progress": False},
        "aspects_file": "summeval",
        "method": "gptscore",
        **config,
    }
    path = folder / "judge.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path
