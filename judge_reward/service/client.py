"""Client of the reward service, and a TRL reward function that gets its rewards from it.

``ServiceRewardFunction`` is an async callable, which TRL's ``GRPOTrainer`` (1.16) runs on its own
event loop, concurrently with the other async reward functions::

    from judge_reward.service import ServiceRewardConfig, ServiceRewardFunction
    judge = ServiceRewardFunction(ServiceRewardConfig(url="http://judge-host:8080", aspects=["coherence"]))
    trainer = GRPOTrainer(model=..., reward_funcs=[judge], ...)

A completion the judge cannot score gets ``None`` (TRL turns it into NaN and leaves it out of the
group baseline) and its reason is counted in :attr:`ServiceRewardFunction.failures`; when the
service cannot be reached after the retries, the whole call returns ``None`` rewards.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import httpx

from ..methods.base import Item
from ..retry import Backoff, Failure, parse_retry_after, retry_async
from ..reward import completion_text, prompt_source
from .config import ServiceRewardConfig

log = logging.getLogger(__name__)

RETRY_STATUS = (429, 502, 503, 504)


class ServiceError(RuntimeError):
    """The service refused the request or could not be reached; ``status`` is the HTTP code (None: no answer)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _Retryable(Exception):
    """A :class:`ServiceError` (``args[0]``) worth another try, with its reason and ``Retry-After``."""

    def __init__(self, error: ServiceError, reason: str, retry_after: float | None = None):
        super().__init__(error)
        self.reason, self.retry_after = reason, retry_after


def _classify(err: BaseException) -> Failure | None:
    if isinstance(err, _Retryable):
        return Failure(err.reason, True, err.retry_after)
    return None


@dataclass
class RemoteScore:
    """One item's answer from ``/v1/score``."""

    reward: float | None
    failure: str | None
    scores: dict[str, dict]
    id: str | int | None = None
    components: dict[str, float] = field(default_factory=dict)
    """``aspect/<name>``: the aspect's normalised score; ``guard/<name>``: a guard's penalty."""


class JudgeServiceClient:
    """Async client of ``/v1/score`` with timeouts, retries, request splitting and several replicas.

    An ``httpx.AsyncClient`` is kept per event loop (TRL calls async reward functions from a loop
    of its own; tests and scripts may use several).

    With several replicas (``ServiceRewardConfig.urls``) each attempt goes to the replica with the
    fewest of this client's requests in flight, round-robin among equals. A connection error, a
    timeout or a 5xx (503: the replica is draining, loading or its queue is full) sends the next
    attempt at once to a replica not yet tried by this request (with a single replica, or when all
    were tried, the usual backoff applies), and the failed replica is skipped by later requests for
    ``replica_cooldown_s``. Every attempt counts against ``retries``; each replica's attempts and
    failures are counted in :attr:`requests_by_url` and :attr:`failures_by_url`.
    """

    def __init__(self, config: ServiceRewardConfig | None = None, **overrides):
        self.config = config or ServiceRewardConfig(**overrides)
        if config is not None and overrides:
            raise ValueError("config: pass a ServiceRewardConfig or keyword overrides, not both")
        self._clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient]" = (
            weakref.WeakKeyDictionary()
        )
        self.urls = self.config.replicas
        self.requests = 0
        self.retried_by_reason: Counter[str] = Counter()
        self.requests_by_url: Counter[str] = Counter()
        self.failures_by_url: Counter[str] = Counter()
        self._inflight: Counter[str] = Counter()
        self._skip_until: dict[str, float] = {}
        self._turn = 0

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None or client.is_closed:
            c = self.config
            headers = {"Authorization": f"Bearer {c.token}"} if c.token else {}
            limits = httpx.Limits(max_connections=64 * len(self.urls), max_keepalive_connections=16 * len(self.urls))
            client = httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(c.timeout_s, connect=c.connect_timeout_s),
                **{"limits": limits, **c.extra},  # extra may set its own limits
            )
            self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    @property
    def retried(self) -> int:
        """Retries made, all reasons together (:attr:`retried_by_reason` has them apart)."""
        return sum(self.retried_by_reason.values())

    def _available(self, tried: set[str]) -> list[str]:
        now = time.monotonic()
        return [u for u in self.urls if u not in tried and self._skip_until.get(u, 0.0) <= now]

    def _pick(self, tried: set[str]) -> str:
        """The replica for the next attempt: untried and not cooling down if possible, fewest in flight."""
        candidates = self._available(tried) or [u for u in self.urls if u not in tried] or self.urls
        n = len(self.urls)
        self._turn += 1
        order = {u: (self._turn + k) % n for k, u in enumerate(self.urls)}  # rotates the tie-break
        return min(candidates, key=lambda u: (self._inflight[u], order[u]))

    def _failed(self, url: str, tried: set[str], error: ServiceError, reason: str,
                retry_after: float | None) -> _Retryable:
        """Count a replica's failed attempt, skip it for a while, and say how soon to retry."""
        self.failures_by_url[url] += 1
        if len(self.urls) > 1:
            cooldown = self.config.replica_cooldown_s if retry_after is None else min(retry_after, self.config.max_backoff_s)
            self._skip_until[url] = time.monotonic() + cooldown
            if self._available(tried):
                retry_after = 0.0  # another replica is there: no reason to wait
        return _Retryable(error, reason, retry_after)

    async def request(self, method: str, path: str, payload: dict | None = None) -> dict:
        """One call with retries on connection errors, timeouts, 429/502/503/504 (``Retry-After`` honoured);
        with several replicas, any 5xx also moves the call to another replica."""
        c = self.config
        tried: set[str] = set()
        several = len(self.urls) > 1

        async def attempt() -> dict:
            url = self._pick(tried)
            tried.add(url)
            self.requests += 1
            self.requests_by_url[url] += 1
            self._inflight[url] += 1
            try:
                resp = await self._http().request(method, url + path, json=payload)
            except httpx.TransportError as err:  # connect, read, write, pool timeouts and refusals
                reason = "timeout" if isinstance(err, httpx.TimeoutException) else "connection"
                error = ServiceError(f"{method} {url}{path}: {type(err).__name__}: {err or 'no answer'}")
                raise self._failed(url, tried, error, reason, None) from None
            finally:
                self._inflight[url] -= 1
            if resp.status_code < 400:
                return resp.json()
            try:
                detail = resp.json().get("detail")
            except ValueError:
                detail = resp.text[:200]
            error = ServiceError(f"{method} {url}{path}: HTTP {resp.status_code}: {detail}", resp.status_code)
            if resp.status_code not in RETRY_STATUS and not (several and resp.status_code >= 500):
                raise error  # the request itself is wrong: retrying cannot help
            reason = "rate_limited" if resp.status_code == 429 else "server_error"
            raise self._failed(url, tried, error, reason, parse_retry_after(resp.headers))

        def on_retry(err: BaseException, failure: Failure, retry: int, wait: float) -> None:
            log.warning("%s; retry %d/%d in %.1fs", err.args[0], retry, c.retries, wait)

        backoff = Backoff(c.retries, c.backoff_s, c.max_backoff_s, jitter=(1.0, 1.25))
        try:
            return await retry_async(attempt, _classify, backoff, self.retried_by_reason, on_retry)
        except _Retryable as err:
            raise err.args[0] from None

    async def info(self) -> dict:
        return await self.request("GET", "/v1/info")

    async def score(
        self,
        items: Sequence[Item | dict],
        aspects: Sequence[str] | None = None,
        method: str | None = None,
        details: bool = False,
    ) -> list[RemoteScore]:
        """Score items on the service; results are in input order. Raises :class:`ServiceError`."""
        rows = [_as_row(it, k) for k, it in enumerate(items)]
        if not rows:
            return []
        size = self.config.max_items_per_request
        chunks = [rows[lo:lo + size] for lo in range(0, len(rows), size)]
        aspects = list(aspects) if aspects is not None else self.config.aspects
        method = method or self.config.method

        async def one(chunk):
            body: dict[str, Any] = {"items": chunk, "details": details}
            if aspects is not None:
                body["aspects"] = aspects
            if method is not None:
                body["method"] = method
            answer = await self.request("POST", "/v1/score", body)
            results = answer.get("results")
            if not isinstance(results, list) or len(results) != len(chunk):
                got = len(results) if isinstance(results, list) else type(results).__name__
                raise ServiceError(f"/v1/score: {got} results for {len(chunk)} items")
            return results

        answers = await asyncio.gather(*(one(ch) for ch in chunks))
        return [
            RemoteScore(r.get("reward"), r.get("failure"), r.get("scores") or {}, r.get("id"), r.get("components") or {})
            for results in answers for r in results
        ]

    def score_sync(self, items, aspects=None, method=None, details=False) -> list[RemoteScore]:
        """:meth:`score` from synchronous code (not from inside a running event loop)."""

        async def run():
            try:
                return await self.score(items, aspects, method, details)
            finally:
                await self.aclose()

        return asyncio.run(run())


def _as_row(item: Item | dict, k: int) -> dict:
    if isinstance(item, Item):
        row = {"output": item.output, "source": item.source}
        if item.reference is not None:
            row["reference"] = item.reference
        if item.id is not None:
            row["id"] = item.id
        return row
    if isinstance(item, dict) and isinstance(item.get("output"), str):
        return dict(item)
    raise TypeError(f"items[{k}]: expected an Item or a mapping with text 'output', got {item!r:.80}")


class ServiceRewardFunction:
    """A TRL reward function (``reward_funcs`` entry) that scores completions on a judge-reward service.

    Called by TRL as ``await f(prompts=..., completions=..., completion_ids=..., **columns,
    trainer_state=..., log_metric=..., log_extra=...)``. All completions of one call go to the
    service together, so the G completions of a prompt share its prefix in the judge.
    """

    def __init__(self, config: ServiceRewardConfig | None = None, **overrides):
        self.config = config or ServiceRewardConfig(**overrides)
        if config is not None and overrides:
            raise ValueError("config: pass a ServiceRewardConfig or keyword overrides, not both")
        self.client = JudgeServiceClient(self.config)
        self.__name__ = self.config.name  # TRL logs rewards/<__name__>/...
        self.failures: Counter[str] = Counter()
        self._source_guards: list[str] | None = None  # the service's, asked once (/v1/info)
        self.calls = 0
        self.scored = 0
        self.seconds = 0.0

    def items(self, prompts: Sequence[Any], completions: Sequence[Any], columns: dict) -> list[Item]:
        c = self.config
        if len(prompts) != len(completions):
            raise ValueError(f"completions: {len(completions)} completions for {len(prompts)} prompts")
        sources = columns.get(c.source_column) if c.source_column else None
        if c.source_column and sources is None:
            raise KeyError(f"source_column: the dataset has no column {c.source_column!r}")
        refs = columns.get(c.reference_column) if c.reference_column else None
        out = []
        for k, (p, comp) in enumerate(zip(prompts, completions)):
            # The same extraction as the in-process reward (judge_reward.reward): source from the
            # column or the prompt's last user message, output from the last assistant message.
            if sources is not None:
                source = prompt_source(sources[k], f"{c.source_column}[{k}]")
            else:
                source = prompt_source(p, f"prompts[{k}]")
            ref = refs[k] if refs is not None else None
            out.append(Item(completion_text(comp, f"completions[{k}]"), source, ref if isinstance(ref, str) else None))
        return out

    async def _check_prompt_as_source(self, columns: dict) -> None:
        """Before the prompt is sent as the source: not when the config forbids it, nor when the
        service's reward compares completions with their source, unless the config says so."""
        c = self.config
        if c.source_column:  # the column is read, and its absence is an error (items())
            return
        listed = sorted(k for k in columns if not k.startswith(("log_", "trainer_")))
        if c.source_from_prompt is False:
            raise ValueError(f"source_column: unset, and source_from_prompt is False (columns: {listed})")
        if c.source_from_prompt is None:
            if self._source_guards is None:
                self._source_guards = list((await self.client.info()).get("source_guards", []))
            if self._source_guards:
                raise ValueError(
                    f"the service's reward: {', '.join(self._source_guards)} compare the completion with its source, "
                    f"and no source column is set (columns: {listed}); set source_column, or source_from_prompt=True to "
                    f"compare with the prompt")

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs) -> list[float | None]:
        items = self.items(prompts, completions, kwargs)
        self.calls += 1
        start = time.perf_counter()
        try:
            await self._check_prompt_as_source(kwargs)  # a service that cannot say fails the call like scoring would
            results = await self.client.score(items)
        except ServiceError as err:
            reason = f"service: {err}"
            log.warning("judge service unavailable; %d rewards are None: %s", len(items), err)
            self.failures[reason] += len(items)
            rewards: list[float | None] = [None] * len(items)
            reasons: list[str | None] = [reason] * len(items)
        else:
            rewards = [r.reward for r in results]
            reasons = [r.failure if r.reward is None else None for r in results]
            for reason in reasons:
                if reason is not None:
                    self.failures[reason] += 1
        self.seconds += time.perf_counter() - start
        self.scored += sum(r is not None for r in rewards)
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        if callable(log_metric):
            n_failed = sum(r is None for r in rewards)
            log_metric(f"{self.__name__}/failure_rate", n_failed / max(len(rewards), 1))
            log_metric(f"{self.__name__}/seconds", time.perf_counter() - start)
        if callable(log_extra):
            log_extra(f"{self.__name__}_failure", [r or "" for r in reasons])
        return rewards

    def stats(self) -> dict:
        return {"calls": self.calls, "scored": self.scored, "seconds": self.seconds,
                "failures": dict(self.failures), "requests": self.client.requests, "retried": self.client.retried,
                "retried_by_reason": dict(self.client.retried_by_reason)}
