"""Judge backend for OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, ...) through the ``openai`` client.

What each interface method sends:

* ``candidate_logprobs`` (G-Eval): one greedy request per prompt with ``logprobs``/``top_logprobs``
  (``/completions``, or ``/chat/completions`` with ``endpoint="chat"``), generating just enough
  tokens to resolve multi-token values; the listed tokens are mapped onto the candidate values by
  :func:`judge_reward.candidates.map_top_logprobs` (same writing rules as the local backend; what is
  exact and what is a lower bound is documented there). ``details`` carries the mass on candidates.
  A response without logprobs is an error for that request, never a silent switch to sampling.
* ``continuation_logprobs`` (GPTScore): ``/completions`` with ``echo=True`` and ``logprobs``, or
  vLLM's ``prompt_logprobs``; which one the server honours is probed once. Continuation tokens are
  found by their ``text_offset`` against ``len(context)``.
* ``generate``: ``n=`` samples per request, falling back to separate requests when a server rejects
  or ignores ``n > 1``.

Every call of one interface method runs all its requests concurrently on a private event loop in a
worker thread (so the sync methods also work when called from inside a running event loop), under
a concurrency limit and optional requests/tokens-per-minute limits. Timeouts, 429 and 5xx are
retried with exponential backoff and jitter (``Retry-After`` honoured); other 4xx are not. A request
that still fails gets ``error`` set to the reason; every input gets a result, in input order.
Counters are in :meth:`OpenAIBackend.stats`.

llama.cpp (llama-cpp-python's server) needs ``--logits_all true`` for any logprobs; ``max_tokens=0``
means "unlimited" there, so at least 1 is always sent; its echo logprobs sort the whole vocabulary
for every prompt token (seconds per token for a 262k vocabulary); it silently ignores
``prompt_logprobs``; and for models that add no BOS token its echo logprobs are shifted by one token.
Each of these is detected (see :meth:`OpenAIBackend.capabilities`) and either worked around or
reported by name.

The backend is split by responsibility: :mod:`.openai_transport` (event loop, concurrency and rate
limits, one request with retries, failure kinds, counters), :mod:`.openai_probes` (what the server
supports) and :mod:`.openai_parsing` (responses to numbers); this module has the configuration and
the interface methods, and re-exports the names that used to live here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Optional, Sequence

import openai

from ..candidates import SLOT_SUFFIX, map_top_logprobs, positions_needed
from ..config import ConfigError, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, Section
from .base import (
    BackendError,
    CandidateLogprobs,
    CandidateRequest,
    ContinuationLogprobs,
    ContinuationRequest,
    GenerationRequest,
    Generations,
)
from .openai_parsing import (
    _chat_positions,
    _choices,
    _completion_positions,
    _echo_continuation,
    _prompt_logprobs_continuation,
)
from .openai_probes import (  # noqa: F401  (PROBE_TEXT and the echo-shift detectors: re-exported)
    PROBE_TEXT,
    _CapabilityProbes,
    _detect_echo_shift,
    _echo_shift_from_statistics,
)
from .openai_transport import FAILURE_KINDS, BackendStats, _BadAnswer, _RateLimiter, _Transport  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

ENDPOINTS = ("completions", "chat")
CONTINUATION_MODES = ("auto", "echo", "prompt_logprobs")
ECHO_ALIGNMENTS = ("auto", "aligned", "shifted")
TOKENIZER_ENDPOINTS = ("auto", "llamacpp", "vllm", "none")


@dataclass
class OpenAIBackendConfig(Section):
    """How to reach an OpenAI-compatible server and how hard to push it (``backend:`` with ``kind: openai``)."""

    section_path: ClassVar[str] = "backend"

    model: str = ""
    """The served model's name (``gpt-4o-mini``, the ``--model`` of vLLM, any name for llama.cpp)."""
    base_url: Optional[str] = None
    """API root including ``/v1``; ``None`` reads ``OPENAI_BASE_URL``, then the OpenAI default."""
    api_key: Optional[str] = None
    """``None`` reads ``OPENAI_API_KEY``; a server without auth (a local base_url) gets a placeholder."""
    endpoint: Literal[ENDPOINTS] = "completions"
    """Where ``candidate_logprobs`` and ``generate`` go: ``completions`` (base models, vLLM,
    llama.cpp, gpt-3.5-turbo-instruct) or ``chat`` (chat models; the prompt is one user message)."""
    system_prompt: Optional[str] = None
    """Optional system message for ``endpoint="chat"``."""
    temperature: NonNegativeFloat = 0.0
    """Temperature of the scoring requests. 0 keeps the generated path on the most likely token,
    which is the path multi-token candidates are resolved along."""
    max_tokens: Optional[PositiveInt] = None
    """Upper bound on tokens generated per ``generate`` sample (``None``: the request's own)."""
    timeout_s: PositiveFloat = 60.0
    """Per-request timeout (seconds); a timed-out request is retried."""
    top_logprobs: PositiveInt = 20
    """Alternatives requested per position (OpenAI: at most 20 on chat, 5 on legacy completions)."""
    max_concurrency: PositiveInt = 32
    """Requests in flight at once."""
    requests_per_minute: Optional[PositiveFloat] = None
    """Client-side request rate limit (``None``: none)."""
    tokens_per_minute: Optional[PositiveFloat] = None
    """Client-side token rate limit: prompt (estimated from characters) + max completion tokens."""
    rate_burst_s: PositiveFloat = 1.0
    """How many seconds' worth of the rate limits may be spent at once."""
    max_retries: NonNegativeInt = 5
    """Retries after the first attempt, for timeouts, connection errors, 408/409/429, 5xx and
    malformed answers. Other 4xx and answers without logprobs are not retried."""
    backoff_initial_s: PositiveFloat = 0.5
    backoff_max_s: PositiveFloat = 30.0
    retry_after_max_s: NonNegativeFloat = 120.0
    """Longest ``Retry-After`` honoured; a longer one is capped."""
    continuation_mode: Literal[CONTINUATION_MODES] = "auto"
    """GPTScore transport: ``auto`` probes the server once; ``echo`` (``/completions`` with
    ``echo=True``); ``prompt_logprobs`` (vLLM's extension)."""
    echo_alignment: Literal[ECHO_ALIGNMENTS] = "auto"
    """``aligned``: echo logprob i belongs to token i. ``shifted``: llama.cpp's misalignment for
    models without a BOS token (each logprob is read from the next position's top list).
    ``auto`` probes."""
    shifted_echo_top_logprobs: PositiveInt = 100
    """With a shifted echo, a token's logprob is looked up in the previous position's top list; this
    many alternatives are requested (a token outside them makes that request fail, by name)."""
    trim_slot_space: bool = False
    """Send G-Eval prompts without the slot's trailing space, for servers whose tokenizer merges the
    space into the number (GPT-2/tiktoken ``" 4"``); ``" 4"`` and ``"4"`` both count either way."""
    chars_per_token: PositiveFloat = 4.0
    """Estimate of characters per token, for the tokens-per-minute limit and for ``truncate_tokens``
    when the server has no tokenizer endpoint."""
    max_context_tokens: Optional[PositiveInt] = None
    """Context window; ``None`` asks ``/v1/models`` (vLLM's ``max_model_len``) and else is unknown."""
    tokenizer_endpoint: Literal[TOKENIZER_ENDPOINTS] = "auto"
    """Exact token counts: ``llamacpp`` (``/extras/tokenize``), ``vllm`` (``/tokenize``), ``none``,
    or ``auto`` (try both once)."""
    extra_body: dict = field(default_factory=dict)
    """Extra JSON fields sent with every request (``top_k``, ``repeat_penalty``, vLLM options)."""
    model_id: Optional[str] = None
    """Identity of the judge in cache keys; default ``openai:<base_url>:<model>``."""

    def check(self) -> None:
        if not self.model.strip():
            raise ConfigError(f"the served model's name is required, got {self.model!r}", field="model")








class OpenAIBackend(_Transport, _CapabilityProbes):
    """A :class:`~judge_reward.backends.base.JudgeBackend` over an OpenAI-compatible HTTP API."""

    def __init__(self, config: OpenAIBackendConfig | None = None, **overrides):
        if config is None:
            config = OpenAIBackendConfig(**overrides)
        elif overrides:
            raise TypeError("pass either a config or keyword overrides, not both")
        self.config = config
        base_url = config.base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = config.api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            if base_url is None:
                raise BackendError(
                    "api_key: not set; pass api_key or set OPENAI_API_KEY (or set base_url to a local server)"
                )
            api_key = "not-needed"  # local servers without auth still need some header value
        # The client's own retries are off: retries, backoff and counting happen here.
        self._client_kwargs = {"base_url": base_url, "api_key": api_key, "timeout": config.timeout_s, "max_retries": 0}
        self.client = openai.OpenAI(**self._client_kwargs)  # sync client: models, tokenizer endpoints
        self.base_url = str(self.client.base_url).rstrip("/")
        self.model_id = config.model_id or f"openai:{self.base_url}:{config.model}"
        self._stats = BackendStats()
        self._stats_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        self._aclient: openai.AsyncOpenAI | None = None
        self._sem: asyncio.Semaphore | None = None
        self._limiter: _RateLimiter | None = None
        self._probe_lock: asyncio.Lock | None = None
        self._caps: dict[str, Any] = {"n_supported": None}
        self._tokenizer: str | None = None if config.tokenizer_endpoint == "auto" else config.tokenizer_endpoint
        self._context: int | None | bool = config.max_context_tokens or False  # False: not asked yet
        self._warned: set[str] = set()

    # -- the JudgeBackend interface -----------------------------------------------------------------

    def candidate_logprobs(self, requests: Sequence[CandidateRequest]) -> list[CandidateLogprobs]:
        return self._run(self._call(self._candidates, list(requests), CandidateLogprobs))

    def continuation_logprobs(self, requests: Sequence[ContinuationRequest]) -> list[ContinuationLogprobs]:
        return self._run(self._call(self._continuations, list(requests), ContinuationLogprobs))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generations]:
        return self._run(self._call(self._generations, list(requests), Generations))

    async def acandidate_logprobs(self, requests: Sequence[CandidateRequest]) -> list[CandidateLogprobs]:
        """Async form of :meth:`candidate_logprobs` for callers with their own event loop."""
        return await self._await(self._call(self._candidates, list(requests), CandidateLogprobs))

    async def acontinuation_logprobs(self, requests: Sequence[ContinuationRequest]) -> list[ContinuationLogprobs]:
        return await self._await(self._call(self._continuations, list(requests), ContinuationLogprobs))

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Generations]:
        return await self._await(self._call(self._generations, list(requests), Generations))

    async def _call(self, handler, requests: list, result_type) -> list:
        """Run ``handler`` for every request concurrently; one result per input, in input order."""
        start = time.monotonic()
        try:
            results = await handler(requests)
        except BaseException:  # cancelled by close(): every input of the call is counted failed
            self._bump(failed=len(requests))
            self._count_failure("failures", "cancelled", len(requests))
            raise
        finally:
            self._bump(calls=1, inputs=len(requests), wall_time_s=time.monotonic() - start)
        out = []
        for res in results:
            if isinstance(res, BaseException):  # a bug must not lose the other results
                self._count_failure("failures", "internal")
                res = result_type(None, error=f"internal error: {type(res).__name__}: {res}")
            elif res.error is None:
                self._bump(succeeded=1)
            if res.error is not None:
                self._bump(failed=1)
            out.append(res)
        return out

    def _fail(self, result_type, err: _BadAnswer, **details):
        self._count_failure("failures", err.kind)
        return result_type(None, error=err.reason, details={"failure": err.kind, **details})

    # -- candidate_logprobs (G-Eval) ----------------------------------------------------------------

    async def _candidates(self, requests: list[CandidateRequest]) -> list:
        return await asyncio.gather(*(self._one_candidate(r) for r in requests), return_exceptions=True)

    async def _one_candidate(self, req: CandidateRequest) -> CandidateLogprobs:
        cfg = self.config
        if not req.candidates:
            return self._fail(CandidateLogprobs, _BadAnswer("client_error", "candidates: a scale needs at least one value"))
        prompt = req.prompt
        if cfg.trim_slot_space and prompt.endswith(SLOT_SUFFIX):
            prompt = prompt[: -len(SLOT_SUFFIX)]
        steps = positions_needed(req.candidates)  # >= 1 always: llama.cpp reads max_tokens=0 as unlimited
        k = int(cfg.top_logprobs)
        if cfg.endpoint == "chat":
            async def send():
                return await self._aclient.chat.completions.create(
                    model=cfg.model, messages=self._messages(prompt), max_tokens=steps, temperature=cfg.temperature,
                    logprobs=True, top_logprobs=k, n=1, extra_body=self._body() or None,
                )
            parse = _chat_positions
        else:
            async def send():
                return await self._aclient.completions.create(
                    model=cfg.model, prompt=prompt, max_tokens=steps, temperature=cfg.temperature,
                    logprobs=k, n=1, extra_body=self._body() or None,
                )
            parse = _completion_positions
        try:
            (positions, generated), attempts = await self._request(send, parse, self._estimate(prompt, steps))
        except _BadAnswer as err:
            return self._fail(CandidateLogprobs, err, endpoint=cfg.endpoint)
        mapping = map_top_logprobs(positions, req.candidates)
        details = mapping.as_details()
        details.update(positions=len(positions), generated=generated, top_logprobs=k, attempts=attempts)
        return CandidateLogprobs(mapping.logprobs, details=details)

    def _messages(self, prompt: str) -> list[dict]:
        messages = [{"role": "system", "content": self.config.system_prompt}] if self.config.system_prompt else []
        return messages + [{"role": "user", "content": prompt}]

    # -- continuation_logprobs (GPTScore) -----------------------------------------------------------

    async def _continuations(self, requests: list[ContinuationRequest]) -> list:
        try:
            mode = await self._continuation_mode()
        except _BadAnswer as err:  # the probe itself could not get an answer: fail these, retry next call
            err.reason = f"could not probe the server's GPTScore support: {err.reason}"
            return [self._fail(ContinuationLogprobs, err) for _ in requests]
        return await asyncio.gather(*(self._one_continuation(r, mode) for r in requests), return_exceptions=True)

    async def _one_continuation(self, req: ContinuationRequest, mode: str) -> ContinuationLogprobs:
        cfg = self.config
        if not req.continuation.strip():
            return self._fail(ContinuationLogprobs, _BadAnswer("client_error", "continuation: empty text cannot be scored"))
        prompt = req.context + req.continuation
        shifted = self._caps.get("echo_shift") == 1
        if mode == "echo":
            k = int(cfg.shifted_echo_top_logprobs) if shifted else 1
            timeout = self._echo_timeout(prompt)

            async def send():
                return await self._aclient.completions.create(
                    model=cfg.model, prompt=prompt, max_tokens=1, temperature=0.0, echo=True, logprobs=k,
                    extra_body=self._body() or None, timeout=timeout,
                )

            def parse(resp):
                return _echo_continuation(resp, req.context, req.continuation, shifted, k)
        else:
            async def send():
                return await self._aclient.completions.create(
                    model=cfg.model, prompt=prompt, max_tokens=1, temperature=0.0,
                    extra_body=self._body(prompt_logprobs=1),
                )

            def parse(resp):
                return _prompt_logprobs_continuation(resp, req.context, req.continuation)
        try:
            (tokens, logprobs, details), attempts = await self._request(send, parse, self._estimate(prompt, 1))
        except _BadAnswer as err:
            return self._fail(ContinuationLogprobs, err, mode=mode)
        details.update(mode=mode, attempts=attempts)
        if mode == "echo":
            details["echo_shift"] = 1 if shifted else 0
        return ContinuationLogprobs(logprobs, tokens=tokens, details=details)

    # -- generate -----------------------------------------------------------------------------------

    async def _generations(self, requests: list[GenerationRequest]) -> list:
        return await asyncio.gather(*(self._one_generation(r) for r in requests), return_exceptions=True)

    async def _one_generation(self, req: GenerationRequest) -> Generations:
        if req.n < 1:
            return self._fail(Generations, _BadAnswer("client_error", f"n: must be at least 1, got {req.n}"))
        texts: list[str] = []
        attempts_total = 0
        try:
            if req.n == 1 or self._caps.get("n_supported") is not False:
                try:
                    got, attempts_total = await self._sample(req, req.n, req.seed)
                    texts.extend(got)
                except _BadAnswer as err:
                    if req.n == 1 or err.kind != "client_error":
                        raise
                    self._caps["n_supported"] = False  # rejected n > 1: one request per sample from now on
                    log.info("%s rejected n=%d (%s); sending one request per sample", self.base_url, req.n, err.reason)
                else:
                    if req.n > 1:
                        self._caps["n_supported"] = len(got) >= req.n
            missing = req.n - len(texts)
            if missing > 0:  # rejected or silently ignored n > 1
                seeds = [None if req.seed is None else req.seed + len(texts) + i for i in range(missing)]
                parts = await asyncio.gather(*(self._sample(req, 1, s) for s in seeds))
                for got, attempts in parts:
                    texts.extend(got[:1])
                    attempts_total += attempts
        except _BadAnswer as err:
            return self._fail(Generations, err)
        return Generations(texts[: req.n], details={"attempts": attempts_total, "n_supported": self._caps.get("n_supported")})

    async def _sample(self, req: GenerationRequest, n: int, seed: int | None) -> tuple[list[str], int]:
        cfg = self.config
        max_tokens = max(1, min(req.max_new_tokens, cfg.max_tokens or req.max_new_tokens))
        common: dict[str, Any] = {"model": cfg.model, "max_tokens": max_tokens, "temperature": req.temperature, "n": n}
        if req.stop:
            common["stop"] = list(req.stop)
        if seed is not None:
            common["seed"] = seed
        if cfg.endpoint == "chat":
            async def send():
                return await self._aclient.chat.completions.create(
                    messages=self._messages(req.prompt), extra_body=self._body() or None, **common
                )
        else:
            async def send():
                return await self._aclient.completions.create(prompt=req.prompt, extra_body=self._body() or None, **common)

        def parse(resp):
            choices = _choices(resp)
            texts = []
            for c in sorted(choices, key=lambda c: getattr(c, "index", 0) or 0):
                text = c.message.content if cfg.endpoint == "chat" else c.text
                if text is None:
                    raise _BadAnswer("malformed", "a choice came back without text", True)
                for stop in req.stop:  # servers differ on whether the stop string is included
                    text = text.split(stop, 1)[0]
                texts.append(text)
            return texts

        return await self._request(send, parse, self._estimate(req.prompt, max_tokens, n))

    # -- tokens and context -------------------------------------------------------------------------

    @property
    def max_context_tokens(self) -> int | None:
        if self._context is False:
            self._context = None
            try:
                entries = list(self.client.models.list().data)
                for entry in entries:
                    extra = entry.model_extra or {}
                    size = extra.get("max_model_len") or (extra.get("meta") or {}).get("n_ctx_train")
                    if size and (entry.id == self.config.model or len(entries) == 1):
                        self._context = int(size)
                        break
            except (openai.OpenAIError, ValueError, TypeError) as err:
                log.info("%s: /models gave no context window (%s)", self.base_url, err)
        return self._context or None

    def _root(self) -> str:
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    def _tokenize(self, text: str) -> list[int] | None:
        """Token ids from the server's tokenizer endpoint, or ``None`` when it has none."""
        kinds = [self._tokenizer] if self._tokenizer else ["llamacpp", "vllm"]
        unreachable = False
        for kind in kinds:
            if kind == "none":
                return None
            try:
                if kind == "llamacpp":
                    out = self.client.post(f"{self._root()}/extras/tokenize", cast_to=object, body={"input": text})
                else:
                    out = self.client.post(f"{self._root()}/tokenize", cast_to=object,
                                           body={"model": self.config.model, "prompt": text, "add_special_tokens": False})
                ids = out.get("tokens") if isinstance(out, dict) else None
                if isinstance(ids, list):
                    self._tokenizer = kind
                    return [int(i) for i in ids]
            except openai.APIConnectionError:
                unreachable = True  # a server that is down says nothing about its endpoints: ask again later
            except openai.OpenAIError:
                continue
        if self._tokenizer is None and not unreachable:
            self._tokenizer = "none"
            self._warn_once("tokenizer", "%s has no tokenizer endpoint; token counts are estimated from characters")
        return None

    def count_tokens(self, text: str) -> int | None:
        ids = self._tokenize(text)
        return None if ids is None else len(ids)

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        ids = self._tokenize(text)
        if ids is None:  # no tokenizer: cut at the estimated character count
            return text[: max(0, int(max_tokens * self.config.chars_per_token))]
        if len(ids) <= max_tokens:
            return text
        keep = ids[: max(0, max_tokens)]
        try:
            if self._tokenizer == "llamacpp":
                out = self.client.post(f"{self._root()}/extras/detokenize", cast_to=object, body={"tokens": keep})
                return str(out["text"])
            out = self.client.post(f"{self._root()}/detokenize", cast_to=object, body={"model": self.config.model, "tokens": keep})
            return str(out["prompt"])
        except (openai.OpenAIError, KeyError, TypeError):
            return text[: max(0, int(max_tokens * self.config.chars_per_token))]

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, self.base_url)
