"""Transport and limits of the OpenAI-compatible backend: the private event loop, the concurrency
and rate limits, one HTTP request with retries (:mod:`judge_reward.retry`), failure kinds and the
counters. :class:`_Transport` is a base of :class:`~judge_reward.backends.openai_compat.OpenAIBackend`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable

import openai

from .base import BackendError
from ..retry import Backoff, Failure, parse_retry_after, retry_async

FAILURE_KINDS = (
    "timeout", "connection", "rate_limited", "server_error", "client_error",
    "malformed", "no_logprobs", "unsupported", "internal",
)  # and "cancelled" in stats: inputs of a call that close() ended


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
    if status == 429 and _server_code(err) == "insufficient_quota":  # out of credit: no retry can fix it
        return _BadAnswer("client_error", f"HTTP 429 insufficient_quota (not retried: the account has no credit left): {message}")
    if status == 429:
        return _BadAnswer("rate_limited", f"HTTP 429 rate limited: {message}", True, _retry_after(err))
    if status >= 500:
        return _BadAnswer("server_error", f"HTTP {status} server error: {message}", True, _retry_after(err))
    if status in (408, 409):  # request timeout / lock conflict: worth another try (as OpenAI advises)
        return _BadAnswer("timeout" if status == 408 else "server_error", f"HTTP {status}: {message}", True, _retry_after(err))
    return _BadAnswer("client_error", f"HTTP {status} (not retried): {message}")


def _server_code(err: openai.APIStatusError) -> str | None:
    """The error's ``code`` (or ``type``) in an OpenAI-style body, e.g. ``insufficient_quota``."""
    body = err.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict):
        return inner.get("code") or inner.get("type")
    return None


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


class _Transport:
    """The HTTP side of the backend; the backend's ``__init__`` sets the attributes used here."""

    # Picklable (a judge inside a reward function): the clients, the event loop and its thread and the
    # locks are not; a copy makes its own on first use, as a new backend does.
    _UNPICKLED = ("client", "_aclient", "_loop", "_thread", "_sem", "_limiter", "_probe_lock", "_stats_lock", "_loop_lock")

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name in self._UNPICKLED:
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._stats = BackendStats()  # a copy counts its own calls, from zero
        self._stats_lock = threading.Lock()
        self._loop_lock = threading.Lock()
        self._fresh_connections()

    def _fresh_connections(self) -> None:
        """A new sync client, and no loop or async client yet (made on first use), as a new backend has."""
        self.client = openai.OpenAI(**self._client_kwargs)
        self._aclient = self._loop = self._thread = self._sem = self._limiter = self._probe_lock = None

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is not None and getattr(self, "_loop_pid", None) != os.getpid():
                self._fresh_connections()  # forked: the loop's thread and the clients' sockets stayed in the parent
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, daemon=True, name="openai-backend-loop")
                thread.start()
                self._loop, self._thread, self._loop_pid = loop, thread, os.getpid()
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
        try:
            return asyncio.run_coroutine_threadsafe(coro, loop).result()
        except concurrent.futures.CancelledError:
            raise BackendError("OpenAIBackend was closed while this call was running") from None

    async def _await(self, coro: Awaitable):
        """Run ``coro`` on the private loop from a caller's own event loop."""
        loop = self._ensure_loop()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def close(self) -> None:
        """Close the HTTP clients and stop the worker thread (the backend cannot be used afterwards)."""
        with self._loop_lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            async def shutdown():  # end the calls still running, so their callers are not left waiting
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                if self._aclient is not None:
                    await self._aclient.close()

            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=10)
            loop.close()
        self.client.close()

    def __enter__(self) -> "OpenAIBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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

    def _count_failure(self, table: str, kind: str, n: int = 1) -> None:
        with self._stats_lock:
            getattr(self._stats, table)[kind] += n

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
