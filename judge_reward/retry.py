"""Retries with exponential backoff and jitter, shared by the OpenAI backend and the service client.

One attempt either returns or raises. ``classify`` turns what it raised into a :class:`Failure`
(a reason, whether another try can help, and the server's ``Retry-After`` if it gave one) or
``None`` for errors that are not the caller's to retry (bugs propagate unchanged). Every retry is
counted by its reason in the caller's :class:`collections.Counter`.

The wait before retry ``r`` (1, 2, ...) is:

* with ``Retry-After``: ``min(retry_after, retry_after_max_s) * uniform(*retry_after_jitter)``;
* without: ``min(max_s, min(max_s, initial_s * 2 ** (r - 1)) * uniform(*jitter))``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Awaitable, Callable, Mapping, TypeVar

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


async def retry_async(
    attempt: Callable[[], Awaitable[T]],
    classify: Callable[[BaseException], Failure | None],
    backoff: Backoff,
    retries: Counter | None = None,
    on_retry: Callable[[BaseException, Failure, int, float], None] | None = None,
) -> T:
    """Run ``attempt`` until it returns, raises something not retryable, or the retries run out.

    The last error is re-raised unchanged. ``retries[reason]`` grows by one for every retry made
    (callers that count under a lock of their own pass ``None`` and count in ``on_retry``);
    ``on_retry(error, failure, retry_number, wait_s)`` is called before each wait.
    """
    retry = 0
    while True:
        try:
            return await attempt()
        except Exception as err:
            failure = classify(err)
            if failure is None or not failure.retryable or retry >= backoff.max_retries:
                raise
            retry += 1
            if retries is not None:
                retries[failure.reason] += 1
            wait = backoff.delay(retry, failure.retry_after)
            if on_retry is not None:
                on_retry(err, failure, retry, wait)
            await asyncio.sleep(wait)
