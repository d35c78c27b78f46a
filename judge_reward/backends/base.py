"""The backend interface every judge model implements.

A backend answers three questions about text, and nothing else:

* ``candidate_logprobs``: for a prompt that ends in a form slot, the log-probability of every
  candidate value that could fill the slot (G-Eval's exact score distribution);
* ``continuation_logprobs``: the per-token log-probabilities of a continuation given a context
  (GPTScore);
* ``generate``: sampled completions (auto-CoT steps, the generating rating styles, G-Eval's
  sampling estimate).

Prompt construction, score arithmetic and parsing live above this layer, so a local Hugging Face
model and an OpenAI-compatible server are interchangeable. ``group`` keys say which requests share
a long prefix (the 16 summaries of one article, the G completions of one GRPO prompt); a backend
may use them to compute that prefix once, and must give the same numbers either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable


class BackendError(RuntimeError):
    """A backend cannot answer a request at all (bad configuration, unsupported feature)."""


class InputTooLongError(BackendError, ValueError):
    """The part of the input that may not be truncated does not fit the model's context window."""


@dataclass(frozen=True)
class CandidateRequest:
    """Score every candidate value that could fill the slot at the end of ``prompt``.

    ``candidates`` are the values as written in the form (``"1"``, ``"10"``, ``"100"``), without
    any leading space: how a value is written after the slot and tokenised is decided in one place,
    :mod:`judge_reward.candidates`, not by callers.
    """

    prompt: str
    candidates: tuple[str, ...]
    group: str | None = None  # requests with the same group share a prompt prefix


@dataclass
class CandidateLogprobs:
    """Log P(candidate | prompt) for each candidate, unnormalised (``-inf`` where the backend saw none).

    ``error`` is set instead of raising when one request fails (a server fault, a malformed
    response); the caller turns it into a ``None`` score with that reason.
    """

    logprobs: list[float] | None
    error: str | None = None
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ContinuationRequest:
    """Score the tokens of ``continuation`` given ``context`` (GPTScore's h given T(d, a, S))."""

    context: str
    continuation: str
    group: str | None = None


@dataclass
class ContinuationLogprobs:
    """Per-token log-probabilities of the continuation's tokens, in order."""

    token_logprobs: list[float] | None
    tokens: list[str] | None = None
    error: str | None = None
    details: dict = field(default_factory=dict)


@dataclass(frozen=True)
class GenerationRequest:
    prompt: str
    n: int = 1
    temperature: float = 1.0
    max_new_tokens: int = 128
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass
class Generations:
    texts: list[str] | None
    error: str | None = None
    details: dict = field(default_factory=dict)


@runtime_checkable
class JudgeBackend(Protocol):
    """What every backend provides. ``model_id`` identifies the weights in cache keys."""

    model_id: str

    def candidate_logprobs(self, requests: Sequence[CandidateRequest]) -> list[CandidateLogprobs]: ...

    def continuation_logprobs(self, requests: Sequence[ContinuationRequest]) -> list[ContinuationLogprobs]: ...

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generations]: ...

    def count_tokens(self, text: str) -> int | None:
        """Tokens ``text`` takes in a prompt, or ``None`` when the backend cannot tell."""
        ...

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        """``text`` cut to its first ``max_tokens`` tokens (used to shorten a source, never a scored text)."""
        ...

    @property
    def max_context_tokens(self) -> int | None: ...
