"""Fault injection for testing reward plumbing: a real backend whose chosen requests fail.

A judge failure must reach the trainer as a ``None`` reward with a counted reason. With a real
model, failures are rare and unpredictable, so tests wrap the real (tiny) backend and make chosen
requests come back with ``error`` set, exactly as a backend reports a server fault or an
over-long input.
"""

from __future__ import annotations

from typing import Callable

from judge_reward.backends.base import CandidateLogprobs, ContinuationLogprobs


class FaultyBackend:
    """Delegates to ``inner``; request ``k`` of a call fails with ``error=reason`` when ``fails(k, text)``.

    ``text`` is the scored continuation (GPTScore) or the whole prompt (G-Eval), so a marker in a
    completion selects it; ``k`` is the request's index in the call (``k == 0``: the first item of
    every batch). Use a judge without a memory cache so every request reaches the backend.
    """

    def __init__(self, inner, fails: Callable[[int, str], bool], reason: str = "injected fault: server error"):
        self.inner = inner
        self.fails = fails
        self.reason = reason
        self.model_id = f"{inner.model_id}+faults"
        self.injected = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def continuation_logprobs(self, requests):
        out = self.inner.continuation_logprobs(requests)
        for k, req in enumerate(requests):
            if self.fails(k, req.continuation):
                out[k] = ContinuationLogprobs(None, error=self.reason)
                self.injected += 1
        return out

    def candidate_logprobs(self, requests):
        out = self.inner.candidate_logprobs(requests)
        for k, req in enumerate(requests):
            if self.fails(k, req.prompt):
                out[k] = CandidateLogprobs(None, error=self.reason)
                self.injected += 1
        return out

    def generate(self, requests):
        return self.inner.generate(requests)
