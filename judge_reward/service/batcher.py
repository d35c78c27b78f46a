"""Dynamic batching: concurrent requests merged into full judge batches, run by one worker thread.

The event loop only appends jobs to a bounded queue and awaits futures; the judge runs in a single
worker thread (torch inference is not re-entrant across threads here, and one thread keeps the
judge's caches and counters consistent). The worker takes the oldest job, waits at most
``max_wait_ms`` from that job's arrival for compatible jobs (same method and aspects) to fill
``max_batch_size`` items, and scores them all in **one** ``judge.score`` call, so items of different
requests that share a source also share their prompt prefix in the backend.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..methods.base import Item, Score

log = logging.getLogger(__name__)


class ServiceUnavailable(RuntimeError):
    """The service cannot take the request now; ``retry_after`` says when to try again (seconds)."""

    def __init__(self, reason: str, retry_after: int, kind: str):
        super().__init__(reason)
        self.retry_after = retry_after
        self.kind = kind  # metric label: queue_full, loading, draining, failed


@dataclass
class BatchInfo:
    """What happened to the batch a request was scored in."""

    items: int
    requests: int
    judge_seconds: float
    queued_seconds: float


@dataclass(eq=False)
class _Job:
    items: list[Item]
    key: tuple[str | None, tuple[str, ...] | None]  # (method, aspects)
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    enqueued: float = field(default_factory=time.monotonic)


def _deliver(future: asyncio.Future, result: Any = None, error: BaseException | None = None) -> None:
    if future.done():  # the client went away; nothing to deliver
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _post(job: _Job, result: Any = None, error: BaseException | None = None) -> None:
    try:
        job.loop.call_soon_threadsafe(_deliver, job.future, result, error)
    except RuntimeError:  # the event loop is already closed (the server is gone)
        pass


class DynamicBatcher:
    """Bounded queue + worker thread around a judge (or a factory that builds it in the worker)."""

    def __init__(
        self,
        judge: Any = None,
        *,
        judge_factory: Callable[[], Any] | None = None,
        max_batch_size: int = 64,
        max_wait_ms: float = 10.0,
        max_queue_items: int = 4096,
        metrics: Any = None,
    ):
        if (judge is None) == (judge_factory is None):
            raise ValueError("judge: pass exactly one of judge and judge_factory")
        self.judge = judge
        self._factory = judge_factory
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue_items = max_queue_items
        self.metrics = metrics
        self._queue: deque[_Job] = deque()
        self._queued_items = 0
        self._cond = threading.Condition()
        self._closing = False
        self._loaded = threading.Event()
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._throughput = 0.0  # items per second, smoothed, for Retry-After
        self.batches = 0
        self.items_scored = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="judge-worker", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        return self._loaded.wait(timeout) and self.error is None

    @property
    def ready(self) -> bool:
        return self._loaded.is_set() and self.error is None and not self._closing and self.alive

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def state(self) -> str:
        if self.error is not None:
            return "failed"
        if self._closing:
            return "draining"
        if not self._loaded.is_set():
            return "loading"
        return "ready" if self.alive else "stopped"

    @property
    def queued_items(self) -> int:
        return self._queued_items

    def close(self, timeout: float | None = None) -> bool:
        """Stop taking jobs, finish every queued one, stop the worker. True when it stopped in time."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- event-loop side ----------------------------------------------------------------------

    def retry_after(self) -> int:
        """Seconds until the current queue is likely drained (at least 1)."""
        rate = self._throughput if self._throughput > 0 else float(self.max_batch_size)
        return int(min(60, max(1, math.ceil(self._queued_items / rate))))

    async def submit(
        self, items: Sequence[Item], method: str | None = None, aspects: Sequence[str] | None = None
    ) -> tuple[list[dict[str, Score]], BatchInfo]:
        """Queue one request's items; returns their scores (in order) and the batch they ran in."""
        results = await self.submit_many([(list(items), method, aspects)])
        return results[0]

    async def submit_many(self, parts: Sequence[tuple[list[Item], str | None, Sequence[str] | None]]):
        """Queue several item groups of one request atomically: all are admitted, or none."""
        loop = asyncio.get_running_loop()
        jobs = [
            _Job(items, (method, tuple(aspects) if aspects else None), loop.create_future(), loop)
            for items, method, aspects in parts
        ]
        size = sum(len(j.items) for j in jobs)
        with self._cond:
            if self.error is not None:
                raise ServiceUnavailable(f"the judge failed to load: {self.error}", 60, "failed")
            if self._closing:
                raise ServiceUnavailable("the service is shutting down", 5, "draining")
            if not self._loaded.is_set():
                raise ServiceUnavailable("the judge is still loading", 5, "loading")
            if self._queued_items + size > self.max_queue_items:
                raise ServiceUnavailable(
                    f"queue full: {self._queued_items} items waiting, this request adds {size}, "
                    f"limit {self.max_queue_items}", self.retry_after(), "queue_full",
                )
            self._queue.extend(jobs)
            self._queued_items += size
            self._observe_queue()
            self._cond.notify_all()
        try:
            return await asyncio.gather(*(j.future for j in jobs))
        except asyncio.CancelledError:
            # The client disconnected: drop whatever has not started yet.
            with self._cond:
                for job in jobs:
                    if job in self._queue:
                        self._queue.remove(job)
                        self._queued_items -= len(job.items)
                self._observe_queue()
            raise

    def _observe_queue(self) -> None:
        if self.metrics is not None:
            self.metrics.queue_items.set(self._queued_items)
            self.metrics.queue_requests.set(len(self._queue))

    # -- worker thread ------------------------------------------------------------------------

    def _run(self) -> None:
        if self.judge is None:
            try:
                self.judge = self._factory()
            except BaseException as err:  # report it on /ready and /health instead of dying silently
                self.error = f"{type(err).__name__}: {err}"
                log.exception("loading the judge failed")
                self._loaded.set()
                with self._cond:
                    self._fail_queued(self.error)
                return
        self._loaded.set()
        if self.metrics is not None:
            self.metrics.ready.set(1)
        try:
            while True:
                batch = self._next_batch()
                if batch is None:
                    return
                try:
                    self._execute(batch)
                except Exception as err:  # a bug must not leave requests waiting forever
                    log.exception("the worker failed on a batch")
                    for job in batch:
                        _post(job, None, RuntimeError(f"internal error while scoring: {err}"))
        finally:
            if self.metrics is not None:
                self.metrics.ready.set(0)

    def _fail_queued(self, reason: str) -> None:
        while self._queue:
            job = self._queue.popleft()
            _post(job, None, ServiceUnavailable(reason, 60, "failed"))
        self._queued_items = 0

    def _next_batch(self) -> list[_Job] | None:
        with self._cond:
            while True:
                while not self._queue:
                    if self._closing:
                        return None
                    self._cond.wait()
                first = self._queue[0]
                waiting = sum(len(j.items) for j in self._queue if j.key == first.key)
                remaining = first.enqueued + self.max_wait - time.monotonic()
                if waiting >= self.max_batch_size or remaining <= 0 or self._closing:
                    break
                self._cond.wait(remaining)  # more jobs may arrive, or the first one may be cancelled
            taken, size = [], 0
            for job in self._queue:
                if job.key != first.key:
                    continue
                if taken and size + len(job.items) > self.max_batch_size:
                    break  # FIFO: a later small job does not overtake an earlier large one
                taken.append(job)
                size += len(job.items)
            for job in taken:
                self._queue.remove(job)
            self._queued_items -= size
            self._observe_queue()
            return taken

    def _score(self, items: list[Item], key) -> list[dict[str, Score]]:
        method, aspects = key
        try:
            return self.judge.score(items, aspects=list(aspects) if aspects else None, method=method)
        except Exception as err:  # a judge-wide fault: every item fails with this reason, never a 0
            log.exception("judge.score failed on a batch of %d items", len(items))
            reason = f"judge error: {type(err).__name__}: {err}"
            names = list(aspects) if aspects else list(self.judge.aspect_names)
            return [{a: Score.failure(reason) for a in names} for _ in items]

    def _execute(self, jobs: list[_Job]) -> None:
        items = [it for job in jobs for it in job.items]
        started = time.monotonic()
        results = self._score(items, jobs[0].key)
        if len(jobs) > 1 and all(all(s.value is None and (s.reason or "").startswith("judge error")
                                     for s in r.values()) for r in results):
            # One request can poison a merged batch (e.g. a backend exception); rerun each alone.
            results = [r for job in jobs for r in self._score(job.items, job.key)]
        seconds = time.monotonic() - started
        self.batches += 1
        self.items_scored += len(items)
        rate = len(items) / max(seconds, 1e-6)
        self._throughput = rate if self._throughput == 0 else 0.8 * self._throughput + 0.2 * rate
        if self.metrics is not None:
            self.metrics.observe_batch(len(items), len(jobs), seconds, results)
        offset = 0
        for job in jobs:
            n = len(job.items)
            info = BatchInfo(len(items), len(jobs), seconds, started - job.enqueued)
            _post(job, (results[offset:offset + n], info))
            offset += n
