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
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, Sequence

import openai

from ..candidates import SLOT_SUFFIX, TopPosition, map_top_logprobs, positions_needed
from ..retry import Backoff, Failure, parse_retry_after, retry_async
from .base import (
    BackendError,
    CandidateLogprobs,
    CandidateRequest,
    ContinuationLogprobs,
    ContinuationRequest,
    GenerationRequest,
    Generations,
)

log = logging.getLogger(__name__)

ENDPOINTS = ("completions", "chat")
CONTINUATION_MODES = ("auto", "echo", "prompt_logprobs")
ECHO_ALIGNMENTS = ("auto", "aligned", "shifted")
TOKENIZER_ENDPOINTS = ("auto", "llamacpp", "vllm", "none")
FAILURE_KINDS = (
    "timeout", "connection", "rate_limited", "server_error", "client_error",
    "malformed", "no_logprobs", "unsupported", "internal",
)
# Induction-friendly probe: on the repeats every model predicts the next word confidently, which
# tells an aligned echo from a shifted one (see _echo_shift_from_statistics).
PROBE_TEXT = "one two three four one two three four one two three four one two"


@dataclass
class OpenAIBackendConfig:
    """How to reach an OpenAI-compatible server and how hard to push it."""

    model: str = ""
    """The served model's name (``gpt-4o-mini``, the ``--model`` of vLLM, any name for llama.cpp)."""
    base_url: str | None = None
    """API root including ``/v1``; ``None`` reads ``OPENAI_BASE_URL``, then the OpenAI default."""
    api_key: str | None = None
    """``None`` reads ``OPENAI_API_KEY``; a server without auth (a local base_url) gets a placeholder."""
    endpoint: str = "completions"
    """Where ``candidate_logprobs`` and ``generate`` go: ``completions`` (base models, vLLM,
    llama.cpp, gpt-3.5-turbo-instruct) or ``chat`` (chat models; the prompt is one user message)."""
    system_prompt: str | None = None
    """Optional system message for ``endpoint="chat"``."""
    temperature: float = 0.0
    """Temperature of the scoring requests. 0 keeps the generated path on the most likely token,
    which is the path multi-token candidates are resolved along."""
    max_tokens: int | None = None
    """Upper bound on tokens generated per ``generate`` sample (``None``: the request's own)."""
    timeout_s: float = 60.0
    """Per-request timeout (seconds); a timed-out request is retried."""
    top_logprobs: int = 20
    """Alternatives requested per position (OpenAI: at most 20 on chat, 5 on legacy completions)."""
    max_concurrency: int = 32
    """Requests in flight at once."""
    requests_per_minute: float | None = None
    """Client-side request rate limit (``None``: none)."""
    tokens_per_minute: float | None = None
    """Client-side token rate limit: prompt (estimated from characters) + max completion tokens."""
    rate_burst_s: float = 1.0
    """How many seconds' worth of the rate limits may be spent at once."""
    max_retries: int = 5
    """Retries after the first attempt, for timeouts, connection errors, 408/409/429, 5xx and
    malformed answers. Other 4xx and answers without logprobs are not retried."""
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 120.0
    """Longest ``Retry-After`` honoured; a longer one is capped."""
    continuation_mode: str = "auto"
    """GPTScore transport: ``auto`` probes the server once; ``echo`` (``/completions`` with
    ``echo=True``); ``prompt_logprobs`` (vLLM's extension)."""
    echo_alignment: str = "auto"
    """``aligned``: echo logprob i belongs to token i. ``shifted``: llama.cpp's misalignment for
    models without a BOS token (each logprob is read from the next position's top list).
    ``auto`` probes."""
    shifted_echo_top_logprobs: int = 100
    """With a shifted echo, a token's logprob is looked up in the previous position's top list; this
    many alternatives are requested (a token outside them makes that request fail, by name)."""
    trim_slot_space: bool = False
    """Send G-Eval prompts without the slot's trailing space, for servers whose tokenizer merges the
    space into the number (GPT-2/tiktoken ``" 4"``); ``" 4"`` and ``"4"`` both count either way."""
    chars_per_token: float = 4.0
    """Estimate of characters per token, for the tokens-per-minute limit and for ``truncate_tokens``
    when the server has no tokenizer endpoint."""
    max_context_tokens: int | None = None
    """Context window; ``None`` asks ``/v1/models`` (vLLM's ``max_model_len``) and else is unknown."""
    tokenizer_endpoint: str = "auto"
    """Exact token counts: ``llamacpp`` (``/extras/tokenize``), ``vllm`` (``/tokenize``), ``none``,
    or ``auto`` (try both once)."""
    extra_body: dict = field(default_factory=dict)
    """Extra JSON fields sent with every request (``top_k``, ``repeat_penalty``, vLLM options)."""
    model_id: str | None = None
    """Identity of the judge in cache keys; default ``openai:<base_url>:<model>``."""

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError(f"model: the served model's name is required, got {self.model!r}")
        for name, allowed in (("endpoint", ENDPOINTS), ("continuation_mode", CONTINUATION_MODES),
                              ("echo_alignment", ECHO_ALIGNMENTS), ("tokenizer_endpoint", TOKENIZER_ENDPOINTS)):
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"{name}: unknown value {value!r}; choose one of {allowed}")
        positive = ("timeout_s", "max_concurrency", "top_logprobs", "shifted_echo_top_logprobs",
                    "chars_per_token", "rate_burst_s", "backoff_initial_s", "backoff_max_s")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}: must be a positive number, got {value!r}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries: must be a whole number >= 0, got {self.max_retries!r}")
        for name in ("requests_per_minute", "tokens_per_minute", "max_tokens", "max_context_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0):
                raise ValueError(f"{name}: must be a positive number or null, got {value!r}")
        if not isinstance(self.temperature, (int, float)) or self.temperature < 0:
            raise ValueError(f"temperature: must be >= 0, got {self.temperature!r}")
        if not isinstance(self.extra_body, dict):
            raise ValueError(f"extra_body: expected a mapping, got {self.extra_body!r}")


@dataclass
class BackendStats:
    """Counters summed over the backend's life (or since :meth:`OpenAIBackend.reset_stats`)."""

    calls: int = 0  # interface method calls
    inputs: int = 0  # requests handed in across calls
    succeeded: int = 0  # inputs answered
    failed: int = 0  # inputs that ended with an error
    http_requests: int = 0  # attempts sent, retries and probes included
    retries: int = 0
    retries_by_reason: Counter = field(default_factory=Counter)  # every retry, by the failed attempt's kind
    attempt_failures: Counter = field(default_factory=Counter)  # every failed attempt, by kind
    failures: Counter = field(default_factory=Counter)  # inputs' final failures, by kind
    prompt_tokens: int = 0  # as the server reported them (usage)
    completion_tokens: int = 0
    usage_missing: int = 0  # answers without a usage block
    wall_time_s: float = 0.0  # summed over calls
    rate_limit_wait_s: float = 0.0  # time spent waiting on the client-side rate limits

    def as_dict(self) -> dict:
        out = asdict(self)
        out["retries_by_reason"] = dict(self.retries_by_reason)
        out["attempt_failures"] = dict(self.attempt_failures)
        out["failures"] = dict(self.failures)
        return out


class _BadAnswer(Exception):
    """A request that failed in a known way: ``kind`` from FAILURE_KINDS, a reason, retryable or not."""

    def __init__(self, kind: str, reason: str, retryable: bool = False, retry_after: float | None = None):
        super().__init__(reason)
        self.kind, self.reason, self.retryable, self.retry_after = kind, reason, retryable, retry_after


class _RateLimiter:
    """Token buckets for requests and tokens per minute, refilled continuously."""

    def __init__(self, rpm: float | None, tpm: float | None, burst_s: float):
        self.rpm, self.tpm = rpm, tpm
        self.r_cap = max(1.0, rpm / 60 * burst_s) if rpm else 0.0
        self.t_cap = max(1.0, tpm / 60 * burst_s) if tpm else 0.0
        self.r, self.t = self.r_cap, self.t_cap
        self.stamp = time.monotonic()
        self.lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        dt, self.stamp = now - self.stamp, now
        if self.rpm:
            self.r = min(self.r_cap, self.r + dt * self.rpm / 60)
        if self.tpm:
            self.t = min(self.t_cap, self.t + dt * self.tpm / 60)

    async def acquire(self, tokens: int) -> float:
        """Wait until one request of about ``tokens`` tokens may go; returns the seconds waited."""
        if not self.rpm and not self.tpm:
            return 0.0
        start = time.monotonic()
        need_t = min(float(tokens), self.t_cap) if self.tpm else 0.0  # a huge request waits for a full bucket
        async with self.lock:  # one waiter at a time keeps the order fair
            while True:
                self._refill()
                short_r = (1.0 - self.r) if self.rpm else 0.0
                short_t = (need_t - self.t) if self.tpm else 0.0
                if short_r <= 0 and short_t <= 0:
                    if self.rpm:
                        self.r -= 1.0
                    if self.tpm:
                        self.t -= need_t
                    return time.monotonic() - start
                wait = max(short_r * 60 / self.rpm if self.rpm else 0.0, short_t * 60 / self.tpm if self.tpm else 0.0)
                await asyncio.sleep(max(wait, 0.001))

    def settle(self, estimated: int, actual: int | None) -> None:
        """Charge the difference once the server has said what a request really cost."""
        if self.tpm and actual is not None:
            self.t -= actual - min(float(estimated), self.t_cap)


class OpenAIBackend:
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

    # -- lifecycle and the private event loop ------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, daemon=True, name="openai-backend-loop")
                thread.start()
                self._loop, self._thread = loop, thread
                asyncio.run_coroutine_threadsafe(self._init_async(), loop).result()
            return self._loop

    async def _init_async(self) -> None:
        cfg = self.config
        self._aclient = openai.AsyncOpenAI(**self._client_kwargs)
        self._sem = asyncio.Semaphore(int(cfg.max_concurrency))
        self._limiter = _RateLimiter(cfg.requests_per_minute, cfg.tokens_per_minute, cfg.rate_burst_s)
        self._probe_lock = asyncio.Lock()

    def _run(self, coro: Awaitable):
        loop = self._ensure_loop()
        if threading.current_thread() is self._thread:
            raise RuntimeError("OpenAIBackend: a sync method was called from the backend's own event loop")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    async def _await(self, coro: Awaitable):
        """Run ``coro`` on the private loop from a caller's own event loop."""
        loop = self._ensure_loop()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def close(self) -> None:
        """Close the HTTP clients and stop the worker thread (the backend cannot be used afterwards)."""
        with self._loop_lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            if self._aclient is not None:
                asyncio.run_coroutine_threadsafe(self._aclient.close(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=10)
            loop.close()
        self.client.close()

    def __enter__(self) -> "OpenAIBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- accounting ---------------------------------------------------------------------------------

    def stats(self) -> dict:
        """A snapshot of :class:`BackendStats` as a plain dict (JSON-ready)."""
        with self._stats_lock:
            return self._stats.as_dict()

    def reset_stats(self) -> None:
        with self._stats_lock:
            self._stats = BackendStats()

    def _bump(self, **amounts) -> None:
        with self._stats_lock:
            for name, value in amounts.items():
                setattr(self._stats, name, getattr(self._stats, name) + value)

    def _count_failure(self, table: str, kind: str) -> None:
        with self._stats_lock:
            getattr(self._stats, table)[kind] += 1

    def capabilities(self) -> dict:
        """What has been detected about the server so far (continuation mode, echo shift, n support)."""
        return dict(self._caps)

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

    # -- one HTTP request with retries --------------------------------------------------------------

    async def _request(self, send: Callable[[], Awaitable], parse: Callable[[Any], Any], est_tokens: int):
        """Send, parse, retry. Returns ``(value, attempts)``; raises :class:`_BadAnswer` at the end."""
        attempts = 0

        async def attempt():
            nonlocal attempts
            attempts += 1
            try:
                async with self._sem:
                    waited = await self._limiter.acquire(est_tokens)
                    if waited:
                        self._bump(rate_limit_wait_s=waited)
                    self._bump(http_requests=1)
                    response = await self._send(send)
                self._account(response, est_tokens)
                return parse(response)
            except _BadAnswer as err:
                self._count_failure("attempt_failures", err.kind)
                raise

        try:
            value = await retry_async(attempt, _classify, self._backoff(), on_retry=self._count_retry)
        except _BadAnswer as err:
            if attempts > 1:
                err.reason = f"{err.reason} (after {attempts} attempts)"
            raise
        return value, attempts

    def _backoff(self) -> Backoff:
        cfg = self.config
        # with Retry-After: the server said when; a little jitter spreads the callers out
        return Backoff(cfg.max_retries, cfg.backoff_initial_s, cfg.backoff_max_s, jitter=(0.5, 1.0),
                       retry_after_max_s=cfg.retry_after_max_s, retry_after_jitter=(1.0, 1.1))

    def _count_retry(self, err: BaseException, failure: Failure, retry: int, wait: float) -> None:
        with self._stats_lock:
            self._stats.retries += 1
            self._stats.retries_by_reason[failure.reason] += 1

    async def _send(self, send: Callable[[], Awaitable]):
        """One attempt; every way it can fail becomes a :class:`_BadAnswer` with a kind."""
        try:
            return await send()
        except openai.APITimeoutError:
            raise _BadAnswer("timeout", f"request timed out after {self.config.timeout_s:g}s", True) from None
        except openai.APIConnectionError as err:
            cause = err.__cause__ or err
            raise _BadAnswer("connection", f"connection failed: {type(cause).__name__}: {cause}", True) from None
        except openai.APIStatusError as err:
            raise _status_failure(err) from None
        except (json.JSONDecodeError, openai.APIResponseValidationError, UnicodeDecodeError) as err:
            raise _BadAnswer("malformed", f"unparseable response: {type(err).__name__}: {err}", True) from None

    def _account(self, response, est_tokens: int) -> None:
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None) if usage is not None else None
        completion = getattr(usage, "completion_tokens", None) if usage is not None else None
        if prompt is None and completion is None:
            self._bump(usage_missing=1)
            return
        self._bump(prompt_tokens=int(prompt or 0), completion_tokens=int(completion or 0))
        self._limiter.settle(est_tokens, int(prompt or 0) + int(completion or 0))

    def _estimate(self, text: str, max_tokens: int, n: int = 1) -> int:
        return int(len(text) / self.config.chars_per_token) + 1 + max_tokens * n

    def _body(self, **extra) -> dict:
        """``extra_body`` for the openai client: the configured extras plus this request's own."""
        body = dict(self.config.extra_body)
        body.update(extra)
        return body

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

    def _echo_timeout(self, prompt: str) -> float:
        """Stretch the timeout where echo was measured to be slow (llama.cpp), so retries do not pile
        the same slow work onto a server that cannot cancel it."""
        per_token = self._caps.get("echo_s_per_token")
        if not per_token:
            return self.config.timeout_s
        return max(self.config.timeout_s, 3.0 * per_token * self._estimate(prompt, 1))

    async def _continuation_mode(self) -> str:
        """Find (once) how this server gives prompt-token logprobs, and whether its echo is shifted."""
        cfg = self.config
        async with self._probe_lock:
            if "continuation_mode" in self._caps:
                return self._caps["continuation_mode"]
            mode = cfg.continuation_mode
            if mode in ("auto", "echo"):
                echo = await self._probe_echo()
                if echo is not None:
                    self._caps.update(echo)
                    mode = "echo"
                elif mode == "echo":
                    raise BackendError(
                        f"continuation_mode: 'echo' was asked for, but {self.base_url} ignores echo=True with "
                        "logprobs on /completions"
                    )
            if mode in ("auto", "prompt_logprobs"):
                if await self._probe_prompt_logprobs():
                    mode = "prompt_logprobs"
                else:
                    raise BackendError(
                        f"GPTScore needs prompt-token logprobs, and {self.base_url} gives neither: /completions "
                        "ignores echo=True with logprobs, and vLLM's prompt_logprobs is ignored too "
                        "(llama.cpp ignores prompt_logprobs; OpenAI's chat models support neither). "
                        "Use a server that supports echo or prompt_logprobs, or the local backend."
                    )
            self._caps["continuation_mode"] = mode
            return mode

    async def _probe_echo(self) -> dict | None:
        """Echo the probe text with logprobs. ``None`` when echo is ignored; else what was learned."""
        cfg = self.config

        async def send():
            return await self._aclient.completions.create(
                model=cfg.model, prompt=PROBE_TEXT, max_tokens=1, temperature=0.0, echo=True, logprobs=1,
                extra_body=self._body() or None,
            )

        start = time.monotonic()
        try:
            resp, _ = await self._request(send, lambda r: r, self._estimate(PROBE_TEXT, 1))
        except _BadAnswer as err:
            if err.kind in ("client_error", "unsupported"):
                if "logits_all" in err.reason:
                    raise BackendError(err.reason) from None
                return None  # echo refused outright: try the next mode
            raise
        elapsed = time.monotonic() - start
        choice = (resp.choices or [None])[0]
        lp = getattr(choice, "logprobs", None)
        if choice is None or lp is None or not lp.tokens or not lp.text_offset or not (choice.text or "").startswith(PROBE_TEXT):
            return None
        caps: dict[str, Any] = {"echo_probe_tokens": len(lp.tokens)}
        per_token = elapsed / max(len(lp.tokens), 1)
        if per_token > 0.05:
            caps["echo_s_per_token"] = per_token
            log.warning(
                "%s: echo logprobs cost %.2f s per prompt token here (llama.cpp sorts the whole vocabulary for "
                "each one); GPTScore through this server suits small tests only", self.base_url, per_token,
            )
        if cfg.echo_alignment != "auto":
            caps["echo_shift"] = 1 if cfg.echo_alignment == "shifted" else 0
            caps["echo_shift_evidence"] = "configured"
            return caps
        shift, evidence = _detect_echo_shift(choice.text, lp)
        caps["echo_shift"], caps["echo_shift_evidence"] = shift, evidence
        if shift:
            log.warning(
                "%s: echo logprobs are shifted by one token (llama.cpp with a model that adds no BOS token); "
                "reading each token's logprob from the previous position's top-%d list instead",
                self.base_url, cfg.shifted_echo_top_logprobs,
            )
        return caps

    async def _probe_prompt_logprobs(self) -> bool:
        cfg = self.config

        async def send():
            return await self._aclient.completions.create(
                model=cfg.model, prompt=PROBE_TEXT, max_tokens=1, temperature=0.0,
                extra_body=self._body(prompt_logprobs=1),
            )

        try:
            resp, _ = await self._request(send, lambda r: r, self._estimate(PROBE_TEXT, 1))
        except _BadAnswer as err:
            if err.kind == "client_error":
                return False
            raise
        choice = (resp.choices or [None])[0]
        entries = _extra(choice, "prompt_logprobs") if choice is not None else None
        return isinstance(entries, list) and any(isinstance(e, dict) and e for e in entries)

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


# -- response parsing (pure functions: a response in, numbers or a _BadAnswer out) -------------------


def _extra(obj, name: str):
    """A field the openai types do not declare (vLLM's ``prompt_logprobs``)."""
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def _choices(resp) -> list:
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise _BadAnswer("malformed", f"response has no choices (choices={choices!r})", True)
    return choices


def _no_logprobs(where: str) -> _BadAnswer:
    return _BadAnswer(
        "no_logprobs",
        f"server returned no logprobs ({where}); it cannot give G-Eval probabilities. "
        "Choose the sampling estimate explicitly, or a server/model that returns logprobs",
    )


def _completion_positions(resp) -> tuple[list[TopPosition], str]:
    choice = _choices(resp)[0]
    lp = getattr(choice, "logprobs", None)
    if lp is None or not lp.tokens:
        raise _no_logprobs("choices[0].logprobs is empty")
    tops = lp.top_logprobs
    if not tops or len(tops) != len(lp.tokens):
        raise _no_logprobs(f"choices[0].logprobs.top_logprobs={tops!r} does not match {len(lp.tokens)} tokens")
    positions = []
    for i, tok in enumerate(lp.tokens):
        top = tops[i]
        if not isinstance(top, dict) or not top:
            raise _no_logprobs(f"choices[0].logprobs.top_logprobs[{i}]={top!r}")
        positions.append(TopPosition(tok, tuple((str(t), float(v)) for t, v in top.items() if v is not None)))
    return positions, choice.text or ""


def _chat_positions(resp) -> tuple[list[TopPosition], str]:
    choice = _choices(resp)[0]
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if not content:
        raise _no_logprobs("choices[0].logprobs.content is empty")
    positions = []
    for i, item in enumerate(content):
        top = tuple((t.token, float(t.logprob)) for t in (item.top_logprobs or []))
        if not top:
            raise _no_logprobs(f"choices[0].logprobs.content[{i}].top_logprobs is empty (top_logprobs not honoured)")
        positions.append(TopPosition(item.token, top))
    message = getattr(choice, "message", None)
    return positions, (getattr(message, "content", None) or "")


def _detect_echo_shift(text: str, lp) -> tuple[int, str]:
    """Is echo logprob i about token i (0) or one position late (1, llama.cpp without BOS)?

    Structural evidence first: llama-cpp-python pairs tokens with the rows of logits it computed,
    and without a BOS token there is one row too few, so the generated token goes missing from the
    echoed lists. When generation ended at once (nothing to miss), the top lists decide: aligned,
    the most likely token at i is usually token i itself on a repetitive text; shifted, token i+1.
    """
    tokens, offsets = lp.tokens, lp.text_offset
    if len(text) > len(PROBE_TEXT):
        covered = offsets[-1] + len(tokens[-1]) if tokens else 0
        if covered <= len(PROBE_TEXT):
            return 1, "generated token missing from echoed logprobs"
        return 0, "generated token present in echoed logprobs"
    return _echo_shift_from_statistics(tokens, lp.top_logprobs or [])


def _echo_shift_from_statistics(tokens: list[str], tops: list) -> tuple[int, str]:
    aligned = shifted = 0
    for i, top in enumerate(tops):
        if not top:
            continue
        best = max(top.items(), key=lambda kv: kv[1])[0]
        aligned += best == tokens[i]
        shifted += i + 1 < len(tokens) and best == tokens[i + 1]
    return (1 if shifted > aligned else 0), f"top-1 matched its own token {aligned}x, the next token {shifted}x"


def _loose(text: str) -> str:
    # tokens of split multi-byte characters decode to nothing or U+FFFD; compare without them
    return "".join(ch for ch in text if ch.isascii())


def _pick_continuation(offsets: list[int], tokens: list[str], start: int, end: int) -> tuple[list[int], bool]:
    """Indices of the tokens that belong to ``text[start:end]``: starting inside it, or straddling
    its start (the tokenizer merged context and continuation; flagged)."""
    picked, straddle = [], False
    for i, (off, tok) in enumerate(zip(offsets, tokens)):
        if start <= off < end:
            picked.append(i)
        elif off < start < off + len(tok):
            picked.append(i)
            straddle = True
    return picked, straddle


def _check_spelling(tokens: list[str], continuation: str, where: str) -> None:
    joined = "".join(tokens)
    if joined.endswith(continuation) or _loose(joined).endswith(_loose(continuation)):
        return
    raise _BadAnswer(
        "malformed",
        f"{where}: the tokens found for the continuation spell {joined[:80]!r}, not {continuation[:80]!r}",
    )


def _echo_continuation(resp, context: str, continuation: str, shifted: bool, k: int):
    choice = _choices(resp)[0]
    lp = getattr(choice, "logprobs", None)
    if lp is None or not lp.tokens or lp.token_logprobs is None or lp.text_offset is None:
        raise _no_logprobs("echo: choices[0].logprobs is empty")
    tokens, lps, offsets = list(lp.tokens), list(lp.token_logprobs), list(lp.text_offset)
    if not (len(tokens) == len(lps) == len(offsets)):
        raise _BadAnswer("malformed", f"echo: {len(tokens)} tokens, {len(lps)} logprobs, {len(offsets)} offsets")
    prompt = context + continuation
    if not (choice.text or "").startswith(prompt):
        raise _BadAnswer("unsupported", "echo: the server did not echo the prompt (echo=True ignored)")
    picked, straddle = _pick_continuation(offsets, tokens, len(context), len(prompt))
    if not picked:
        raise _BadAnswer("malformed", f"echo: no echoed token has a text_offset in [{len(context)}, {len(prompt)})")
    out_tokens = [tokens[i] for i in picked]
    _check_spelling(out_tokens, continuation, "echo")
    values = []
    tops = lp.top_logprobs or []
    for i in picked:
        if not shifted:
            value = lps[i]
        else:  # llama.cpp without BOS: the list that predicts token i sits at i - 1
            top = tops[i - 1] if 0 < i <= len(tops) else None
            value = top.get(tokens[i]) if isinstance(top, dict) else None
            if value is None:
                raise _BadAnswer(
                    "unsupported",
                    f"echo shifted by one token (llama.cpp, model without BOS): token {tokens[i]!r} at offset "
                    f"{offsets[i]} is outside the top-{k} list of its position; raise shifted_echo_top_logprobs "
                    "or use a server whose echo is aligned",
                )
        if value is None or not math.isfinite(value):
            raise _BadAnswer("malformed", f"echo: token {tokens[i]!r} at offset {offsets[i]} has logprob {value!r}")
        values.append(float(value))
    details = {"context_tokens": picked[0], "boundary": "merged" if straddle else "canonical"}
    return out_tokens, values, details


def _prompt_logprobs_continuation(resp, context: str, continuation: str):
    choice = _choices(resp)[0]
    entries = _extra(choice, "prompt_logprobs")
    if not isinstance(entries, list) or not entries:
        raise _no_logprobs("prompt_logprobs: the server ignored it")
    prompt = context + continuation
    tokens, values = [], []
    for i, entry in enumerate(entries):
        if i == 0 and entry is None:  # the first prompt token has nothing before it
            tokens.append(None), values.append(None)
            continue
        if not isinstance(entry, dict) or not entry:
            raise _BadAnswer("malformed", f"prompt_logprobs[{i}]={entry!r}")
        first = next(iter(entry.values()))  # vLLM lists the prompt's own token first
        if not isinstance(first, dict) or "logprob" not in first:
            raise _BadAnswer("malformed", f"prompt_logprobs[{i}] has no logprob: {first!r}")
        tokens.append(str(first.get("decoded_token") or ""))
        values.append(float(first["logprob"]))
    # offsets from the end: the decoded tokens after the first spell the end of the prompt
    tail = "".join(t for t in tokens[1:])
    if not prompt.endswith(tail):
        raise _BadAnswer("malformed", f"prompt_logprobs: decoded tokens spell {tail[-80:]!r}, not the prompt's end")
    offsets, pos = [0] * len(tokens), len(prompt)
    for i in range(len(tokens) - 1, 0, -1):
        pos -= len(tokens[i])
        offsets[i] = pos
    texts = ["" if t is None else t for t in tokens]
    picked, straddle = _pick_continuation(offsets, texts, len(context), len(prompt))
    picked = [i for i in picked if i > 0 or tokens[0] is not None]
    if not picked or values[picked[0]] is None:
        raise _BadAnswer("malformed", "prompt_logprobs: the continuation's first token has no logprob")
    out_tokens = [texts[i] for i in picked]
    _check_spelling(out_tokens, continuation, "prompt_logprobs")
    return out_tokens, [values[i] for i in picked], {"context_tokens": picked[0], "boundary": "merged" if straddle else "canonical"}


def _retry_after(err: openai.APIStatusError) -> float | None:
    return parse_retry_after(err.response.headers)


def _classify(err: BaseException) -> Failure | None:
    if isinstance(err, _BadAnswer):
        return Failure(err.kind, err.retryable, err.retry_after)
    return None


def _status_failure(err: openai.APIStatusError) -> _BadAnswer:
    status = err.status_code
    message = _server_message(err)
    if "logits_all" in message:
        return _BadAnswer(
            "unsupported",
            f"llama.cpp server was started without --logits_all true, which every logprobs request needs "
            f"(HTTP {status}: {message})",
        )
    if status == 429:
        return _BadAnswer("rate_limited", f"HTTP 429 rate limited: {message}", True, _retry_after(err))
    if status >= 500:
        return _BadAnswer("server_error", f"HTTP {status} server error: {message}", True, _retry_after(err))
    if status in (408, 409):  # request timeout / lock conflict: worth another try (as OpenAI advises)
        return _BadAnswer("timeout" if status == 408 else "server_error", f"HTTP {status}: {message}", True, _retry_after(err))
    return _BadAnswer("client_error", f"HTTP {status} (not retried): {message}")


def _server_message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        if body.get("detail"):
            return str(body["detail"])
    return str(getattr(err, "message", err))
