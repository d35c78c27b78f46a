"""Retries with exponential backoff and jitter, on tenacity, for the OpenAI backend and the service client.

tenacity runs the attempts, the waits and the stop; this module holds the policy the two callers
share. One attempt either returns or raises. ``classify`` turns what it raised into a
:class:`Failure` (a reason, whether another try can help, and the server's ``Retry-After`` if it
gave one) or ``None`` for errors that are not the caller's to retry (bugs propagate unchanged).
Every retry is counted by its reason in the caller's :class:`collections.Counter`; when the retries
run out, the last error is raised unchanged (a judge failure then ends as a ``None`` reward with
its reason, never a silent 0).

The HTTP clients' own retries stay off (``openai.AsyncOpenAI(max_retries=0)``, plain httpx): they
do not retry an answer that arrived but cannot be used (no choices, no log-probabilities, bad
JSON), they would bypass the rate limiter and the per-reason counters, and they cannot say why a
request failed in the end.

The wait before retry ``r`` (1, 2, ...) is:

* with ``Retry-After``: ``min(retry_after, retry_after_max_s) * uniform(*retry_after_jitter)``;
* without: ``min(max_s, min(max_s, initial_s * 2 ** (r - 1)) * uniform(*jitter))``.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Awaitable, Callable, Mapping, TypeVar

import tenacity

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """How one failed attempt is treated: ``reason`` (the counter's key), retryable or not."""

    reason: str
    retryable: bool
    retry_after: float | None = None


@dataclass(frozen=True)
class Backoff:
    """How many retries, and how long to wait before each."""

    max_retries: int
    initial_s: float
    max_s: float
    jitter: tuple[float, float] = (0.5, 1.0)
    """Factor drawn uniformly and applied to the exponential delay."""
    retry_after_max_s: float | None = None
    """Longest ``Retry-After`` honoured (``None``: ``max_s``)."""
    retry_after_jitter: tuple[float, float] = (1.0, 1.0)
    """Factor drawn uniformly and applied to a server's ``Retry-After`` (so callers spread out)."""

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        if retry_after is not None:
            cap = self.max_s if self.retry_after_max_s is None else self.retry_after_max_s
            return min(retry_after, cap) * _uniform(self.retry_after_jitter)
        ceiling = min(self.max_s, self.initial_s * 2 ** (retry - 1))
        return min(self.max_s, ceiling * _uniform(self.jitter))


def _uniform(bounds: tuple[float, float]) -> float:
    lo, hi = bounds
    return lo if lo == hi else random.uniform(lo, hi)


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date); ``None`` if absent or unreadable."""
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if value:
            try:
                return max(0.0, float(value))
            except ValueError:
                return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
    return None


def retrying(
    classify: Callable[[BaseException], Failure | None],
    backoff: Backoff,
    retries: Counter | None = None,
    on_retry: Callable[[BaseException, Failure, int, float], None] | None = None,
) -> tenacity.AsyncRetrying:
    """The tenacity policy: retry what ``classify`` calls retryable, at most ``backoff.max_retries``
    times, waiting :meth:`Backoff.delay`; count each retry in ``retries[reason]`` and call
    ``on_retry(error, failure, retry_number, wait_s)`` before each wait; re-raise the last error."""

    def failure(state: tenacity.RetryCallState) -> Failure | None:
        error = state.outcome.exception() if state.outcome is not None else None
        return classify(error) if error is not None else None

    def retryable(state: tenacity.RetryCallState) -> bool:
        found = failure(state)
        return found is not None and found.retryable

    def wait(state: tenacity.RetryCallState) -> float:
        found = failure(state)
        return backoff.delay(state.attempt_number, found.retry_after if found else None)

    def before_sleep(state: tenacity.RetryCallState) -> None:
        found = failure(state)
        if retries is not None:
            retries[found.reason] += 1
        if on_retry is not None:
            on_retry(state.outcome.exception(), found, state.attempt_number, state.next_action.sleep)

    return tenacity.AsyncRetrying(retry=retryable, wait=wait, stop=tenacity.stop_after_attempt(backoff.max_retries + 1),
                                  before_sleep=before_sleep, reraise=True)


async def retry_async(
    attempt: Callable[[], Awaitable[T]],
    classify: Callable[[BaseException], Failure | None],
    backoff: Backoff,
    retries: Counter | None = None,
    on_retry: Callable[[BaseException, Failure, int, float], None] | None = None,
) -> T:
    """Run ``attempt`` until it returns, raises something not retryable, or the retries run out
    (:func:`retrying`). The last error is re-raised unchanged. ``retries[reason]`` grows by one for
    every retry made (callers that count under a lock of their own pass ``None`` and count in
    ``on_retry``); ``on_retry(error, failure, retry_number, wait_s)`` is called before each wait.
    """
    return await retrying(classify, backoff, retries, on_retry)(attempt)
