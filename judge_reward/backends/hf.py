"""Local Hugging Face judge: exact log-probabilities from batched forward passes.

Everything a judge asks of a local model reduces to *token rows*: a sequence of ids, the positions
whose next-token log-probabilities are wanted, and optionally sets of token ids whose total
probability is wanted after the last token. This module turns text requests into rows (through
:mod:`judge_reward.candidates` for slot candidates) and evaluates rows as cheaply as it exactly can:

* **LM head only where needed.** The decoder body runs over every token, but the vocabulary
  projection (262k columns for Gemma, most of the cost) runs only at the positions whose
  probabilities are read.
* **Prefix sharing.** Rows of one group (the 16 summaries of an article, the G completions of a
  GRPO prompt, the candidates of one slot) usually start with the same long prefix. It is run once
  and its KV cache is copied across the batch of suffixes.
* **Length-sorted, token-budgeted batches** with right padding; results do not depend on batch
  composition or padding side (tested).
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
import os
import threading
from array import array
from collections import Counter, defaultdict
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal, Optional, Sequence

import numpy as np
import torch
from pydantic import Field
from tqdm.auto import tqdm

from ..candidates import common_prefix_len, number_continuation_ids, tokenize_candidates
from ..config import Expect, NonNegativeInt, PositiveInt, Section
from .base import (
    CandidateLogprobs,
    CandidateRequest,
    ContinuationLogprobs,
    ContinuationRequest,
    Generations,
    GenerationRequest,
)
from . import cpu_attention
from .loading import DEFAULT_MODEL, converted_directory, resolve_model
from .token_tree import pack_token_tree

log = logging.getLogger(__name__)

# Rows of fp32 logits finished at a time on a CPU (see HFBackend._log_normaliser): 8 x 262k x 4 B is
# 8 MB, in cache; measured 5% faster per head chunk than one fp32 pass over all 256 rows.
_CPU_NORMALISER_ROWS = 8

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class HFBackendConfig(Section):
    """How to load and run a local judge model (a judge config's ``backend:`` with ``kind: hf``)."""

    section_path: ClassVar[str] = "backend"

    model: str = DEFAULT_MODEL
    """``embedded:gemma3-270m`` (default), ``embedded:smollm2``, a ``.gguf`` file or a local model directory."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """``auto`` picks bfloat16 on CUDA and on CPUs with native bf16 (AVX512-BF16/AMX), else float32."""
    device: str = "auto"
    """``auto`` uses CUDA when present, else the CPU."""
    max_batch_tokens: PositiveInt = 8192
    """Upper bound on padded tokens in one forward pass (rows x longest row)."""
    max_batch_rows: PositiveInt = 64
    max_padding: Annotated[float, Field(ge=0), Expect("a share >= 0 (1 or more: never split)")] = 0.15
    """Start a new batch rather than let padding exceed this share of a batch's padded tokens
    (rows are length-sorted, so each batch holds rows of similar length)."""
    min_split_tokens: NonNegativeInt = 256
    """...but never split a batch holding fewer real tokens than this: tiny batches waste more."""
    prefix_sharing: bool = True
    """Run a group's shared prefix once and reuse its KV cache for every row of the group."""
    min_shared_tokens: NonNegativeInt = 32
    """Share a prefix only when it is at least this long; shorter ones are cheaper to recompute."""
    tree_sharing: bool = True
    """After a group's common prefix, pack rows that still share their beginnings (extractive summaries
    opening with the same sentence, repeated GRPO completions) into token trees, so each shared token is
    computed once (see :mod:`judge_reward.backends.token_tree`). Used where the model takes custom
    attention masks (sdpa or eager attention, full or sliding-window layers); the numbers do not change."""
    tree_min_shared: PositiveInt = 8
    """Pack a row with its neighbour only when they share at least this many tokens."""
    tree_max_row_tokens: PositiveInt = 256
    """Longest packed row (a cluster, or short rows laid end to end): every token of a packed row
    attends over the whole row, masked. On 32 SummEval summaries 128 to 1024 all ran within run-to-run
    noise (~10%) of each other; 256 keeps the masked attention work of a row small."""
    cpu_gemm_attention: bool = True
    """On a CPU in bf16/fp16, run the model's attention as batched GEMMs instead of PyTorch's flash
    kernel (about twice as fast for judging's shapes; eager attention's numerics; see
    :mod:`judge_reward.backends.cpu_attention`). Applies to models on transformers' SDPA attention,
    a model passed in included (its config's ``attn_implementation`` is switched)."""
    cuda_attention: Literal["no_cudnn", "pytorch"] = "no_cudnn"
    """Which PyTorch attention kernels the judge may use on CUDA in bf16/fp16: ``no_cudnn`` (flash,
    memory-efficient or math, whichever takes the call; masked calls run the math kernel) or
    ``pytorch`` (PyTorch's own choice, which on an H200 took cuDNN's kernel for the judge's masked
    calls). cuDNN builds an execution plan for every new shape, and training brings new shapes every
    step: inside a GRPO step the judge's attention took 0.59 s of CPU time against 0.03 s when the
    same call ran again outside (README, "On a GPU"). fp32 on CUDA always runs the math kernel."""
    head_chunk: PositiveInt = 256
    """Positions per LM-head matmul. The backend keeps one model-dtype buffer of this many rows x
    vocabulary between calls (256 x 262k for Gemma: 128 MB in bf16), plus a few fp32 rows on a CPU."""
    padding_side: Literal["left", "right"] = "right"
    prompt_format: Literal["plain", "chat"] = "plain"
    """``plain`` feeds prompts as text; ``chat`` wraps them in the tokenizer's chat template as a user turn."""
    adapter: Optional[str] = None
    """Path to a PEFT adapter to apply to the judge."""
    max_length: Optional[PositiveInt] = None
    """Context window override; defaults to the model's ``max_position_embeddings``."""
    progress: bool = True


def _pick_dtype(name: str, device: torch.device) -> torch.dtype:
    if name != "auto":
        if name not in DTYPES:
            raise ValueError(f"dtype: unknown value {name!r}; choose auto, {', '.join(DTYPES)}")
        return DTYPES[name]
    if device.type == "cuda":
        return torch.bfloat16
    try:
        native_bf16 = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    except AttributeError:  # older torch without the probes
        native_bf16 = False
    return torch.bfloat16 if native_bf16 else torch.float32


def attention_kernels(device: torch.device, dtype: torch.dtype, cuda_attention: str = "no_cudnn"):
    """The context the judge's forward passes run in: on CUDA, PyTorch's math SDPA kernel for fp32
    and every kernel but cuDNN's for bf16/fp16 (``cuda_attention="pytorch"``: PyTorch's own choice);
    on a CPU, PyTorch's own choice.

    Measured on an H200 (torch 2.11, transformers 5.24; README, "On a GPU"): in fp32 the default
    kernel choice put one unshared 896-token G-Eval row up to 2.42 nats away from the CPU's fp32
    result, the math kernel 0.0000; in bf16 (the CUDA default) the default (cuDNN's kernel: the same
    numbers to the last digit) and the math kernel both agreed with the CPU's fp32 result within bf16
    rounding (0.08-0.11 nats). cuDNN's kernel is left out for its per-shape plans (see
    :attr:`HFBackendConfig.cuda_attention`).
    """
    if device.type != "cuda":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if dtype == torch.float32:
        return sdpa_kernel(SDPBackend.MATH)
    if cuda_attention == "no_cudnn":
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
    return nullcontext()


def _pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@dataclass
class TokenRow:
    """One sequence to evaluate.

    ``ids[score_from:]`` get their log-probabilities (each given everything before it);
    ``next_sets`` get log P(next token in set) after the last id.
    """

    ids: list[int]
    score_from: int
    next_sets: list[list[int]] = field(default_factory=list)

    @property
    def first_needed(self) -> int:
        """The first position whose hidden state is read."""
        return self.score_from - 1 if self.score_from < len(self.ids) else len(self.ids) - 1


@dataclass
class RowResult:
    token_logprobs: list[float]
    next_logprobs: list[float]


# How many distinct text heads (all but the last line) the backend keeps the token ids of; a G-Eval
# batch needs one per item, the four aspects of an item share it.
HEAD_MEMO_SIZE = 1024
_UNSAFE = ()  # a head whose texts must be tokenised whole (a token crossed its last line's start)
_UNSEEN = object()


class HFBackend:
    """A local causal LM as a judge backend (see :class:`HFBackendConfig`)."""

    def __init__(self, config: HFBackendConfig | None = None, *, model=None, tokenizer=None, model_id: str | None = None):
        """Load from ``config.model``, or wrap an already built ``model`` and ``tokenizer`` (tests, PEFT users)."""
        self.config = config or HFBackendConfig()
        self.device = _pick_device(self.config.device)
        if model is None:
            model, tokenizer, model_id = self._load()
        elif tokenizer is None:
            raise ValueError("tokenizer: required when a model object is passed")
        if self.config.adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, self.config.adapter).merge_and_unload()
            model_id = f"{model_id or 'model'}+{self.config.adapter}"
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.dtype = next(model.parameters()).dtype
        self.model_id = f"{model_id or getattr(model.config, '_name_or_path', 'model')}:{str(self.dtype).split('.')[-1]}"
        self.body = model.get_decoder()
        # transformers renamed the KV cache argument and output past_key_values -> cache (5.2x; the
        # old name warns on every call and goes in 5.40): use the name this version's decoder takes
        self._cache_name = "cache" if "cache" in inspect.signature(self.body.forward).parameters else "past_key_values"
        self.head = model.get_output_embeddings()
        self.softcap = getattr(model.config, "final_logit_softcapping", None)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
        self._digit_ids: torch.Tensor | None = None
        self._head_buffer: torch.Tensor | None = None  # raw head values, head_chunk x vocab, model dtype
        self._normaliser_block: torch.Tensor | None = None  # a few fp32 rows of logits
        self._head_lock = threading.Lock()
        self._memo_lock = threading.Lock()
        self._heads: dict[str, tuple | None] = {}  # see _encode_piece
        self._special_wrap: tuple[list[int], list[int]] | None | bool = False  # see encode; False: not yet known
        self.work: Counter[str] = Counter()
        """Tokens run since load: ``requested`` (the rows' own tokens), ``body`` (token columns the decoder
        ran over, padding included, shared prefixes and tree tokens once) and ``head`` (LM-head rows)."""
        self.flops_per_token = {
            "body": 2 * sum(p.numel() for n, p in self.body.named_parameters() if p.dim() == 2 and "embed" not in n),
            "head": 2 * self.head.weight.numel(),
        }
        """Matmul FLOPs per unit of the ``body`` and ``head`` work counters (attention excluded)."""
        if self.config.prompt_format == "chat" and not getattr(tokenizer, "chat_template", None):
            raise ValueError("prompt_format: 'chat' needs a tokenizer with a chat template; this one has none")
        self._use_gemm_attention()
        self._check_head_path()
        self._tree_layout = self._tree_mask_layout()
        # Cost estimate that chooses how packed rows are laid out, beside the body's matmul FLOPs per
        # token: attention FLOPs per token and key, weighted by how much slower than the matmuls
        # attention runs (benchmarks/attention_kernels.py, head_dim 256 on a CPU: the GEMM kernel at
        # ~72% of the bf16 matmul rate, SDPA's flash kernel at ~37%).
        cfg = model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        slowdown = 1.4 if getattr(cfg, "_attn_implementation", None) == cpu_attention.NAME else 2.7
        self._flops_per_key = slowdown * 4 * cfg.num_attention_heads * head_dim * cfg.num_hidden_layers

    # -- loading -----------------------------------------------------------------------------

    def __getstate__(self) -> dict:  # picklable (a judge inside a reward function): the lock is made afresh
        state = self.__dict__.copy()
        del state["_head_lock"], state["_memo_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._head_lock = threading.Lock()
        self._memo_lock = threading.Lock()

    def _load(self):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download at run time
        source = resolve_model(self.config.model)
        directory = converted_directory(source)
        dtype = _pick_dtype(self.config.dtype, self.device)
        tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype, local_files_only=True)
        return model.to(self.device), tokenizer, source.model_id

    def _use_gemm_attention(self) -> None:
        if (self.config.cpu_gemm_attention and self.device.type == "cpu"
                and self.dtype in (torch.bfloat16, torch.float16)
                and getattr(self.model.config, "_attn_implementation", None) == "sdpa"):
            self.model.set_attn_implementation(cpu_attention.NAME)

    def _check_head_path(self) -> None:
        """Fail loudly if body + head differs from the model's own logits (an unusual head, a scaling)."""
        ids = torch.tensor([self.encode("The judge checks its head path.")], device=self.device)
        with torch.no_grad():
            reference = self.model(input_ids=ids).logits[0, -1].float()
            raw = self._raw_logits(self.body(input_ids=ids).last_hidden_state[0, -1:])[0]
            mine = self._finish(raw, torch.arange(raw.shape[0], device=raw.device))
        tol = 1e-3 if self.dtype == torch.float32 else 0.1
        if (reference - mine).abs().max().item() > tol * max(1.0, reference.abs().max().item()):
            raise RuntimeError(
                f"model: {type(self.model).__name__} computes its logits in a way this backend does not "
                "reproduce (head path check failed)"
            )

    def _tree_mask_layout(self) -> dict[str, tuple[int, int | None]] | None:
        """The attention masks a packed token tree needs, as {layer type: (a layer of that type, its
        sliding window or None)}; None where this model cannot take custom masks (tree sharing off)."""
        cfg = self.model.config
        if not self.config.tree_sharing or getattr(cfg, "_attn_implementation", None) not in ("sdpa", "eager", cpu_attention.NAME):
            return None
        types = getattr(cfg, "layer_types", None)
        if types is None:  # one kind of layer; a model-wide sliding window would need its own mask
            return None if getattr(cfg, "sliding_window", None) else {"full_attention": (0, None)}
        if not set(types) <= {"full_attention", "sliding_attention"}:
            return None  # chunked or linear attention layers: no tree masks for those
        return {t: (types.index(t), cfg.sliding_window if t == "sliding_attention" else None) for t in set(types)}

    # -- text -> ids: the one place prompts are rendered and tokenised ------------------------

    def render(self, prompt: str) -> str:
        if self.config.prompt_format == "chat":
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        return prompt

    def encode(self, text: str) -> list[int]:
        """Ids the model reads for ``text``, with the BOS token exactly once (if the model uses one)."""
        wrap = self._special_tokens()
        if wrap is None:
            ids = self.tokenizer(text, add_special_tokens=True)["input_ids"]
        else:
            ids = wrap[0] + self._encode_piece(text) + wrap[1]
        bos = self.tokenizer.bos_token_id
        # A chat template writes its own BOS; the tokenizer would add a second one.
        if bos is not None and len(ids) >= 2 and ids[0] == bos and ids[1] == bos:
            ids = ids[1:]
        return list(ids)

    def _special_tokens(self) -> tuple[list[int], list[int]] | None:
        """The ids the tokenizer puts before and after a text's own (BOS, EOS), where that is all
        ``add_special_tokens`` changes (checked on two texts); None where it does more."""
        if self._special_wrap is False:
            wrap = None
            probes = ["Rate the summary.\n\n- Coherence: ", "A text\nwith two lines"]
            bare = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in probes]
            full = [self.tokenizer(t, add_special_tokens=True)["input_ids"] for t in probes]
            if all(len(f) >= len(b) for f, b in zip(full, bare)):
                k = next((i for i in range(len(full[0]) - len(bare[0]) + 1)
                          if full[0][i:i + len(bare[0])] == bare[0]), None)
                if k is not None:
                    before, after = full[0][:k], full[0][k + len(bare[0]):]
                    if all(f == before + b + after for f, b in zip(full, bare)):
                        wrap = (list(before), list(after))
            self._special_wrap = wrap
        return self._special_wrap  # type: ignore[return-value]

    def _encode_piece(self, text: str) -> list[int]:
        """Ids of ``text`` as a piece inside a longer text (no special tokens), tokenising only the
        last line of texts whose head (everything before it) was seen before.

        The four aspects' G-Eval prompts of an item differ only in their form line, and each is
        tokenised twice (fitting the source, then scoring): four ~850-token prompts came to eight
        whole tokenisations per item, most of four-aspect G-Eval's extra time on a GPU. Now a head's
        ids are kept once a whole tokenisation of a text with that head ends in exactly its last
        line's own ids (no token crosses the line start; checked on the head's first text where the
        line is short, else on its second); a later text with that head then costs its last line,
        taken where that line begins with the same token as the checked one (a merge across the
        start would have to change it). The same two checks as the candidates'
        last-line path (:func:`judge_reward.candidates.tokenize_candidates`); the tests compare with
        whole-text tokenisation on every G-Eval prompt with Gemma's tokenizer and on tiny ones.
        """
        start = text.rfind("\n") + 1
        if start == 0 or start == len(text):
            return self._tokenize(text)
        head, line = text[:start], text[start:]
        known = self._heads.get(head, _UNSEEN)
        if known == _UNSAFE:
            return self._tokenize(text)
        if known not in (_UNSEEN, None):  # (the head's ids, its checked line's first token)
            line_ids = self._tokenize(line)
            if line_ids[:1] == [known[1]]:
                return known[0].tolist() + line_ids
            return self._tokenize(text)
        ids = self._tokenize(text)
        # Check the line start (one more tokenisation, of the line) on a head's first text where the
        # line is short, else on its second: a head seen once costs at most a quarter more.
        if known is None or 4 * len(line) <= len(text):
            line_ids = self._tokenize(line)
            n = len(line_ids)
            clean = 0 < n < len(ids) and ids[-n:] == line_ids
            # ids kept compact (4 bytes each, not a Python int each): heads of long sources add up
            self._remember(head, (array("i", ids[:-n]), line_ids[0]) if clean else _UNSAFE)
        else:
            self._remember(head, None)  # seen once
        return ids

    def clear_token_memo(self) -> None:
        """Forget the kept heads (benchmarks that score the same texts again, to time them afresh)."""
        with self._memo_lock:
            self._heads.clear()

    def _tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _tokenize_many(self, texts: list[str]) -> list[list[int]]:
        """:meth:`_tokenize` of several texts in one tokenizer call (its per-call cost, ~0.1 ms,
        otherwise paid per G-Eval scale value)."""
        return self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]

    def _remember(self, head: str, value) -> None:
        with self._memo_lock:
            self._heads[head] = value
            while len(self._heads) > HEAD_MEMO_SIZE:
                del self._heads[next(iter(self._heads))]  # the oldest head

    def count_tokens(self, text: str) -> int:
        return len(self._encode_piece(text))

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        ids = self._encode_piece(text)
        if len(ids) <= max_tokens:
            return text
        return self.tokenizer.decode(ids[: max(0, max_tokens)], skip_special_tokens=True)

    @property
    def max_context_tokens(self) -> int:
        if self.config.max_length:
            return self.config.max_length
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    @property
    def digit_ids(self) -> list[int]:
        """Vocabulary ids that would extend a number (see :func:`candidates.number_continuation_ids`)."""
        if self._digit_ids is None:
            vocab = self.tokenizer.convert_ids_to_tokens(list(range(self.head.weight.shape[0])))
            self._digit_ids = number_continuation_ids([t or "" for t in vocab])
        return self._digit_ids

    # -- public interface ---------------------------------------------------------------------

    def candidate_logprobs(self, requests: Sequence[CandidateRequest]) -> list[CandidateLogprobs]:
        rows, groups, owners, plans = [], [], [], []
        results: list[CandidateLogprobs | None] = [None] * len(requests)
        for i, req in enumerate(requests):
            try:
                ct = tokenize_candidates(self.encode, self.render(req.prompt), req.candidates, self._tokenize_many)
            except ValueError as err:
                results[i] = CandidateLogprobs(None, error=str(err))
                continue
            longest = len(ct.shared) + max(len(s) for s in ct.suffixes)
            if longest > self.max_context_tokens:
                results[i] = CandidateLogprobs(None, error=self._too_long(longest))
                continue
            group = req.group if req.group is not None else f"#candidates{i}"
            single = all(len(s) == 1 for s in ct.suffixes) and not ct.terminate
            if single:
                # Every candidate is one token: a single row, read at its last position.
                rows.append(TokenRow(list(ct.shared), len(ct.shared), [[s[0]] for s in ct.suffixes]))
                owners.append(i)
                groups.append(group)
                plans.append((i, "single", None))
            else:
                for j, suffix in enumerate(ct.suffixes):
                    sets = [self.digit_ids] if ct.terminate else []
                    rows.append(TokenRow(list(ct.shared) + list(suffix), len(ct.shared), sets))
                    owners.append(i)
                    groups.append(group)
                    plans.append((i, "multi", j))
            results[i] = CandidateLogprobs([-math.inf] * len(req.candidates), details={
                "candidate_tokens": [len(s) for s in ct.suffixes], "terminated": ct.terminate,
            })
        for (i, kind, j), out in zip(plans, self.score_rows(rows, groups)):
            target = results[i]
            if kind == "single":
                target.logprobs = list(out.next_logprobs)
            else:
                lp = sum(out.token_logprobs)
                if out.next_logprobs:  # times P(the number ends here)
                    lp += math.log1p(-min(math.exp(out.next_logprobs[0]), 1.0 - 1e-12))
                target.logprobs[j] = lp
        return results  # type: ignore[return-value]

    def continuation_logprobs(self, requests: Sequence[ContinuationRequest]) -> list[ContinuationLogprobs]:
        rows, groups, owners = [], [], []
        results: list[ContinuationLogprobs | None] = [None] * len(requests)
        for i, req in enumerate(requests):
            if not req.continuation.strip():
                results[i] = ContinuationLogprobs(None, error="continuation: empty text cannot be scored")
                continue
            ids, start, boundary = self.split_tokens(self.render(req.context), req.continuation)
            if len(ids) > self.max_context_tokens:
                results[i] = ContinuationLogprobs(None, error=self._too_long(len(ids)))
                continue
            rows.append(TokenRow(ids, start))
            groups.append(req.group if req.group is not None else f"#continuation{i}")
            owners.append(i)
            tokens = self.tokenizer.convert_ids_to_tokens(ids[start:])
            results[i] = ContinuationLogprobs(None, tokens=tokens, details={
                "context_tokens": start, "boundary": boundary,
            })
        for i, out in zip(owners, self.score_rows(rows, groups)):
            results[i].token_logprobs = out.token_logprobs
        return results  # type: ignore[return-value]

    def split_tokens(self, context: str, continuation: str) -> tuple[list[int], int, str]:
        """Ids of ``context + continuation`` and where the continuation's tokens start.

        The continuation's tokens are the ones the model itself reads after the context: the
        canonical tokenisation of the whole text, cut where the context's own tokens end. If the
        tokenizer merges across that boundary (rare with the templates here, which put a space
        or newline before the scored text), the two parts are tokenised separately instead and the
        result says ``boundary="split"``.
        """
        ctx = self.encode(context)
        full = self.encode(context + continuation)
        if full[: len(ctx)] == ctx and len(full) > len(ctx):
            return full, len(ctx), "canonical"
        tail = self._tokenize(continuation)
        return ctx + list(tail), len(ctx), "split"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generations]:
        out: list[Generations] = []
        bar = tqdm(total=len(requests), desc="generate", unit="prompt", disable=self._quiet(len(requests)))
        for req in requests:
            try:
                out.append(Generations(self._generate_one(req)))
            except Exception as err:  # one bad prompt must not lose the others
                out.append(Generations(None, error=f"generation failed: {err}"))
            bar.update(1)
        bar.close()
        return out

    def _generate_one(self, req: GenerationRequest) -> list[str]:
        ids = torch.tensor([self.encode(self.render(req.prompt))], device=self.device)
        if ids.shape[1] + req.max_new_tokens > self.max_context_tokens:
            raise ValueError(self._too_long(ids.shape[1] + req.max_new_tokens))
        sample = req.temperature > 0
        # A seeded request must not reset the caller's global RNG (a trainer's sampling and dropout):
        # seed inside a forked RNG state, which is restored afterwards.
        devices = [self.device] if self.device.type == "cuda" else []
        with (torch.random.fork_rng(devices=devices, enabled=req.seed is not None), torch.no_grad(),
              attention_kernels(self.device, self.dtype, self.config.cuda_attention)):
            if req.seed is not None:
                torch.manual_seed(req.seed)
            gen = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=sample,
                temperature=req.temperature if sample else None,
                top_p=1.0 if sample else None,
                top_k=0 if sample else None,
                num_return_sequences=req.n,
                max_new_tokens=req.max_new_tokens,
                pad_token_id=self.pad_id,
                stop_strings=list(req.stop) or None,
                tokenizer=self.tokenizer if req.stop else None,
            )
        texts = self.tokenizer.batch_decode(gen[:, ids.shape[1]:], skip_special_tokens=True)
        for stop in req.stop:  # generate stops after the string; cut it off
            texts = [t.split(stop, 1)[0] for t in texts]
        return texts

    def _too_long(self, n: int) -> str:
        return f"input of {n} tokens exceeds the judge's context window of {self.max_context_tokens} tokens"

    def _quiet(self, n: int) -> bool | None:
        return True if not self.config.progress or n < 2 else None  # None: tqdm hides itself off a TTY

    # -- token rows -> log-probabilities ------------------------------------------------------

    def score_rows(self, rows: Sequence[TokenRow], groups: Sequence[str] | None = None) -> list[RowResult]:
        """Evaluate rows; rows with the same group key may share their common prefix's KV cache."""
        if not rows:
            return []
        for row in rows:
            if row.score_from < 1 or row.score_from > len(row.ids):
                raise ValueError(f"score_from: {row.score_from} outside 1..{len(row.ids)}")
            if row.score_from == len(row.ids) and not row.next_sets:
                raise ValueError("row: nothing to score (no tokens after score_from and no next sets)")
        groups = list(groups) if groups is not None else [f"#{i}" for i in range(len(rows))]
        by_group: dict[str, list[int]] = defaultdict(list)
        for i, g in enumerate(groups):
            by_group[g].append(i)
        results: list[RowResult | None] = [None] * len(rows)
        flat: list[int] = []
        shared: list[tuple[int, list[int]]] = []
        for members in by_group.values():
            cut = 0
            if self.config.prefix_sharing and len(members) > 1:
                seqs = [rows[i].ids for i in members]
                cut = min(common_prefix_len(seqs), min(rows[i].first_needed for i in members))
            if cut >= self.config.min_shared_tokens:
                shared.append((cut, members))
            else:
                flat.extend(members)
        total = sum(len(r.ids) for r in rows)
        self.work["requested"] += total
        bar = tqdm(total=total, desc="judge", unit="tok", unit_scale=True, disable=self._quiet(len(rows)))
        with torch.inference_mode(), attention_kernels(self.device, self.dtype, self.config.cuda_attention):
            for cut, members in shared:
                self._run_shared(rows, members, cut, results, bar)
            self._run_flat(rows, flat, results, bar)
        bar.close()
        return results  # type: ignore[return-value]

    def _batches(self, lengths: Sequence[int], members: Sequence[int]):
        """Length-sorted batches of ``members`` under the token and row budgets, with bounded padding."""
        cfg = self.config
        order = sorted(members, key=lambda i: lengths[i])
        batch: list[int] = []
        real = 0
        for i in order:
            n = lengths[i]  # the longest so far: rows come sorted
            padded = (len(batch) + 1) * n
            too_padded = real >= cfg.min_split_tokens and padded - (real + n) > cfg.max_padding * padded
            if batch and (padded > cfg.max_batch_tokens or len(batch) >= cfg.max_batch_rows or too_padded):
                yield batch
                batch, real = [], 0
            batch.append(i)
            real += n
        if batch:
            yield batch

    def _run_flat(self, rows, members, results, bar) -> None:
        for batch in self._batches([len(r.ids) for r in rows], members):
            width = max(len(rows[i].ids) for i in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            located = []
            for b, i in enumerate(batch):
                n = len(rows[i].ids)
                start = width - n if self.config.padding_side == "left" else 0
                ids[b, start:start + n] = torch.tensor(rows[i].ids)
                mask[b, start:start + n] = 1
                located.append((i, [(b, start + p) for p in range(rows[i].score_from - 1, n)]))
            position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
            self.work["body"] += ids.numel()
            hidden = self.body(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                position_ids=position_ids.to(self.device),
            ).last_hidden_state
            self._read(rows, located, hidden, results)
            bar.update(sum(len(rows[i].ids) for i in batch))

    def _run_shared(self, rows, members, cut, results, bar) -> None:
        """Run the group's common prefix once, then its rows' remaining tokens against that KV cache.

        The remaining tokens are packed into token trees where rows still share beginnings (and the
        model takes tree masks); otherwise each row is its own packed row, a plain chain.
        """
        prefix = torch.tensor([rows[members[0]].ids[:cut]], device=self.device)
        prefix_cache = getattr(self.body(input_ids=prefix, use_cache=True), self._cache_name)
        self.work["body"] += cut
        bar.update(cut)
        suffixes = [rows[i].ids[cut:] for i in members]
        if self._tree_layout is not None:
            tree = pack_token_tree(
                suffixes, self.config.tree_min_shared, self.config.tree_max_row_tokens,
                column_cost=lambda width: self.flops_per_token["body"] + self._flops_per_key * (cut + width),
            )
        else:
            tree = pack_token_tree(suffixes, min_shared=1, max_row_tokens=0)  # a chain per row
        readers = defaultdict(list)  # packed row -> the members read from it
        for k in range(len(members)):
            readers[tree.row_of[k]].append(k)
        for batch in self._batches([len(r) for r in tree.rows], range(len(tree.rows))):
            packed = [tree.rows[r] for r in batch]
            width = max(len(r) for r in packed)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            depth = torch.zeros((len(batch), width), dtype=torch.long)
            for b, row in enumerate(packed):
                ids[b, :len(row)] = torch.tensor(row.tokens)
                depth[b, :len(row)] = torch.tensor(row.depths)
            cache = copy.deepcopy(prefix_cache)  # the forward pass extends the cache in place
            cache.batch_repeat_interleave(len(batch))
            self.work["body"] += ids.numel()
            hidden = self.body(
                input_ids=ids.to(self.device), attention_mask=self._suffix_masks(packed, depth, cut, cache),
                position_ids=(cut + depth).to(self.device), use_cache=True, **{self._cache_name: cache},
            ).last_hidden_state
            located = []
            for b, r in enumerate(batch):
                for k in readers[r]:
                    i, cols = members[k], tree.columns[k]
                    located.append((i, [(b, cols[p - cut]) for p in range(rows[i].score_from - 1, len(rows[i].ids))]))
            self._read(rows, located, hidden, results)
            bar.update(sum(len(suffixes[k]) for r in batch for k in readers[r]))

    def _suffix_masks(self, packed, depth: torch.Tensor, cut: int, cache):
        """Attention masks for packed rows after a cached prefix of ``cut`` tokens; ``depth`` holds
        each column's depth in its row (batch x width, 0 on padding).

        Without tree sharing: the usual 2-D padding mask. With it: a 4-D mask per layer type. A token
        at depth d sits at position cut + d and sees the prefix (within the sliding window, by
        position, for sliding layers) and its own ancestors in the row. A sliding layer's cache keeps
        only the prefix's last tokens; its mask covers exactly the keys that cache returns.
        """
        width = depth.shape[1]
        if self._tree_layout is None:
            mask = torch.zeros((len(packed), cut + width), dtype=torch.long)
            mask[:, :cut] = 1
            for b, row in enumerate(packed):
                mask[b, cut:cut + len(row)] = 1
            return mask.to(self.device)
        tree = torch.from_numpy(np.stack([row.ancestor_mask(width) for row in packed]))
        masks = {}
        for layer_type, (layer, window) in self._tree_layout.items():
            kv_length, kv_offset = cache.get_mask_sizes(width, layer)
            key_position = kv_offset + torch.arange(kv_length - width)
            if window is None:
                seen = torch.ones((len(packed), width, kv_length - width), dtype=torch.bool)
                own = tree
            else:
                seen = (cut + depth)[:, :, None] - key_position[None, None, :] < window
                own = tree & (depth[:, :, None] - depth[:, None, :] < window)
            mask = torch.cat([seen, own], dim=-1)[:, None].to(self.device)
            if self.model.config._attn_implementation == "eager":  # eager attention adds its mask
                mask = torch.zeros(mask.shape, dtype=self.dtype, device=self.device).masked_fill_(
                    ~mask, torch.finfo(self.dtype).min)
            masks[layer_type] = mask
        return masks if "sliding_attention" in masks else masks["full_attention"]

    def _read(self, rows, located, hidden, results) -> None:
        """Run the LM head on the hidden states the rows need, once per distinct state; fill results.

        ``located`` pairs each row with the (batch, column) of its sequence positions from
        ``score_from - 1`` to its last token. Rows packed into one token tree share columns: each
        distinct column gets one head pass. The head runs in chunks and keeps only the wanted numbers
        per position (target log-probabilities, set totals), never a full vocabulary row.
        """
        slot_of: dict[tuple[int, int], int] = {}
        pair_slot, pair_target, spans, set_reads = [], [], [], []
        for i, where in located:
            row = rows[i]
            spans.append((i, len(pair_slot), len(where) - 1))
            pair_slot.extend(slot_of.setdefault(bt, len(slot_of)) for bt in where[:-1])
            pair_target.extend(row.ids[row.score_from:])
            if row.next_sets:  # the last position is read only for its sets
                set_reads.append((i, slot_of.setdefault(where[-1], len(slot_of)), row.next_sets))
        index = torch.tensor(list(slot_of), dtype=torch.long, device=hidden.device).reshape(-1, 2)
        picked = hidden[index[:, 0], index[:, 1]]
        self.work["head"] += len(slot_of)
        pair_slot_t = torch.tensor(pair_slot, dtype=torch.long, device=hidden.device)
        pair_target_t = torch.tensor(pair_target, dtype=torch.long, device=hidden.device)
        token_lp = torch.empty(len(pair_slot), dtype=torch.float32, device=hidden.device)
        set_lp: dict[int, list[float]] = {}
        step = self.config.head_chunk
        with self._head_lock:  # the logits buffers are shared by every call
            for lo in range(0, len(slot_of), step):
                raw = self._raw_logits(picked[lo:lo + step])
                here = ((pair_slot_t >= lo) & (pair_slot_t < lo + step)).nonzero()[:, 0]
                target_logit = self._finish(raw[pair_slot_t[here] - lo, pair_target_t[here]], pair_target_t[here])
                norm = self._log_normaliser(raw)
                token_lp[here] = target_logit - norm[pair_slot_t[here] - lo]
                reads = [(i, slot - lo, sets) for i, slot, sets in set_reads if lo <= slot < lo + step]
                if reads:
                    set_lp.update(self._set_logprobs(raw, norm, reads))
        token_lp = token_lp.cpu()
        for i, k, n in spans:
            results[i] = RowResult(token_lp[k:k + n].tolist(), set_lp.get(i, []))

    def _set_logprobs(self, raw: torch.Tensor, norm: torch.Tensor, reads) -> dict[int, list[float]]:
        """log P(next token in set) for every set of every read ``(row, slot in raw, sets)``, in one
        pass: the sets' ids padded into one matrix, one gather, one log-sum-exp, one copy back. (Per set
        it took several small operations and a device sync: 320 syncs for a four-aspect G-Eval call of
        16 summaries on a GPU.)"""
        flat = [(slot, s) for _, slot, sets in reads for s in sets]
        width = max(1, max(len(s) for _, s in flat))
        ids = torch.zeros((len(flat), width), dtype=torch.long)
        valid = torch.zeros((len(flat), width), dtype=torch.bool)
        for k, (_, s) in enumerate(flat):
            ids[k, :len(s)] = torch.tensor(s, dtype=torch.long)
            valid[k, :len(s)] = True
        slots = torch.tensor([slot for slot, _ in flat], dtype=torch.long, device=raw.device)
        ids, valid = ids.to(raw.device), valid.to(raw.device)
        logits = self._finish(raw[slots[:, None], ids], ids).masked_fill_(~valid, -math.inf)
        values = (torch.logsumexp(logits, dim=1) - norm[slots]).tolist()
        out, k = {}, 0
        for i, _, sets in reads:
            out[i] = values[k:k + len(sets)]
            k += len(sets)
        return out

    def _raw_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden`` times the head's weight (n x vocab, model dtype), before bias and soft-capping.

        The result lives in a buffer kept between calls: with Gemma's 262k vocabulary a chunk is
        hundreds of MB, and allocating it afresh costs page faults that take about as long as the
        matmul itself on a CPU. Read it before the next call.
        """
        n, vocab = hidden.shape[0], self.head.weight.shape[0]
        if self._head_buffer is None or self._head_buffer.shape[0] < n:
            self._head_buffer = torch.empty(max(n, self.config.head_chunk), vocab, dtype=hidden.dtype, device=hidden.device)
        return torch.matmul(hidden, self.head.weight.t(), out=self._head_buffer[:n])

    def _finish(self, raw: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """fp32 logits from raw head values ``raw`` at vocabulary ids ``ids`` (a new tensor)."""
        return self._finish_(raw.to(torch.float32, copy=True), ids)

    def _finish_(self, logits: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Add the head's bias and soft-cap, in place on fp32 ``logits`` whose last dimension holds
        vocabulary ids ``ids`` (None: the whole vocabulary, in order)."""
        bias = getattr(self.head, "bias", None)
        if bias is not None:
            logits.add_((bias if ids is None else bias[ids]).float())
        if self.softcap:
            logits.div_(self.softcap).tanh_().mul_(self.softcap)
        return logits

    def _log_normaliser(self, raw: torch.Tensor) -> torch.Tensor:
        """Row-wise log-sum-exp of the fp32 logits of ``raw`` (n x vocab, raw head values).

        On a CPU the rows are finished a few at a time in one small fp32 block that stays in cache
        (8 x 262k x 4 B = 8 MB): no full fp32 copy of the chunk is ever written to memory.
        """
        n, vocab = raw.shape
        rows = n if raw.device.type != "cpu" else min(n, _CPU_NORMALISER_ROWS)
        if self._normaliser_block is None or self._normaliser_block.shape[0] < rows or self._normaliser_block.device != raw.device:
            self._normaliser_block = torch.empty(rows, vocab, dtype=torch.float32, device=raw.device)
        out = torch.empty(n, dtype=torch.float32, device=raw.device)
        for r in range(0, n, rows):
            block = self._finish_(self._normaliser_block[:min(rows, n - r)].copy_(raw[r:r + rows]))
            top = block.amax(dim=-1, keepdim=True)
            out[r:r + rows] = top[:, 0] + block.sub_(top).exp_().sum(dim=-1).log()
        return out
