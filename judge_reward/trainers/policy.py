"""Policies for examples and tests: a tiny random Llama built in-process, or a local model directory.

The tiny policy exists so that a full RL loop (generate, judge, update) runs on a laptop CPU in
seconds. Its tokenizer is a byte-level BPE trained on the run's own prompts, so its random
generations are made of words from the articles and the judge has something to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterable

import torch

from judge_reward.config import ConfigError, PositiveInt, Section

# A minimal chat template (user/assistant turns, generation prompt) for conversational datasets.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<' + message['role'] + '>' + message['content'] + '</' + message['role'] + '>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<assistant>' }}{% endif %}"
)


@dataclass
class PolicyConfig(Section):
    """Which policy to train (the ``policy:`` section of a training run)."""

    section_path: ClassVar[str] = "policy"

    model: str = "tiny"
    """``tiny`` (random Llama built in-process) or a local Hugging Face model directory."""
    vocab_size: PositiveInt = 2000
    """Tiny only: BPE vocabulary trained on the prompts."""
    hidden_size: PositiveInt = 64
    num_layers: PositiveInt = 2
    num_heads: PositiveInt = 4
    seed: int = 0

    def check(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ConfigError(f"{self.hidden_size} is not divisible by num_heads {self.num_heads}", field="hidden_size")
        if self.model != "tiny" and not Path(self.model).is_dir():
            raise ConfigError(f"expected 'tiny' or a local model directory, got {self.model!r}", field="model")


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2000):
    """A byte-level BPE tokenizer (with pad/bos/eos and a chat template) trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer)
    out = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
    )
    out.chat_template = CHAT_TEMPLATE
    return out


def tiny_policy(tokenizer, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4, seed: int = 0):
    """A random Llama causal LM sized for CPU tests (a few hundred thousand parameters)."""
    from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_heads,
        max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
    )
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config = GenerationConfig(
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    return model


def load_policy(config: PolicyConfig, texts: Iterable[str] = ()):
    """(model, tokenizer) for a :class:`PolicyConfig`; ``texts`` train the tiny policy's tokenizer."""
    if config.model == "tiny":
        texts = list(texts)
        if not texts:
            raise ConfigError("policy.model: 'tiny' needs prompt texts to train its tokenizer on")
        tokenizer = train_tokenizer(texts, config.vocab_size)
        return tiny_policy(tokenizer, config.hidden_size, config.num_layers, config.num_heads, config.seed), tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(config.model, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(config.model, local_files_only=True)
    return model, tokenizer
