"""Helpers the scoring methods share: fitting a source into the context window, and running the
requests of several aspects in one backend call."""

from __future__ import annotations

from typing import Callable, Sequence

from ..backends.base import JudgeBackend
from .base import Item

# Tokens kept free beyond the prompt: the slot's candidate tokens, a chat template's closing, etc.
MARGIN_TOKENS = 16


def fit_source(
    backend: JudgeBackend, item: Item, prompt_length: Callable[[Item], str], extra_tokens: int = 0
) -> tuple[Item, int]:
    """Shorten ``item.source`` (never the scored text) until the prompt fits the context window.

    ``prompt_length(item)`` renders the whole prompt text for an item. Returns the item to use
    and how many source tokens were cut (0 when nothing was). Raises ``ValueError`` when even an
    empty source does not fit: the scored text itself is too long, and it is never truncated.
    """
    window = backend.max_context_tokens
    if window is None:
        return item, 0
    total = backend.count_tokens(prompt_length(item))
    if total is None or total + extra_tokens + MARGIN_TOKENS <= window:
        return item, 0
    source_tokens = backend.count_tokens(item.source) or 0
    overflow = total + extra_tokens + MARGIN_TOKENS - window
    keep = source_tokens - overflow
    if keep <= 0:
        raise ValueError(
            f"output: the text to score needs {total - source_tokens} tokens with its prompt, more than the "
            f"judge's context window of {window}; it is never truncated"
        )
    shorter = Item(item.output, backend.truncate_tokens(item.source, keep), item.reference, item.id)
    return shorter, source_tokens - keep


def run_plans(plans: Sequence[tuple[list, Callable[[list], list]]], call: Callable[[list], list]) -> list[list]:
    """Run the requests of every plan in one backend ``call`` and hand each plan its own results.

    A plan is (its requests, a function from their results to its Scores); one call lets the
    backend share what requests of different aspects have in common (a prefix, a source)."""
    requests = [r for plan in plans for r in plan[0]]
    results = call(requests) if requests else []
    out, start = [], 0
    for requests_of, finish in plans:
        out.append(finish(results[start:start + len(requests_of)]))
        start += len(requests_of)
    return out
