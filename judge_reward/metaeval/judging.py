"""Run a judge over a dataset's items and collect its scores per aspect.

The judge is anything with ``score(items, aspects=[...]) -> list[dict[aspect, Score]]``
(:class:`judge_reward.Judge`, or a stand-in in tests). A failed judgment (``Score.value is
None``) stays ``None``: :func:`~judge_reward.metaeval.report.evaluate` drops and counts it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..methods.base import Item


@dataclass
class JudgeScores:
    """Scores per aspect aligned with the items, and why the failed ones failed."""

    scores: dict[str, list[float | None]]
    failures: Counter = field(default_factory=Counter)


def judge_aspects(judge, wanted: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``wanted`` into the aspects the judge knows and those it does not.

    A judge without an ``aspect_set`` (a stand-in) is assumed to know every aspect.
    """
    known = getattr(getattr(judge, "aspect_set", None), "aspects", None)
    if known is None:
        return list(wanted), []
    return [a for a in wanted if a in known], [a for a in wanted if a not in known]


def judge_scores(
    judge,
    items: Sequence[Item],
    aspects: Sequence[str],
    chunk_size: int = 64,
    on_chunk: Callable[[int], None] | None = None,
) -> JudgeScores:
    """Score ``items`` on ``aspects`` in chunks (``on_chunk(n_done)`` reports progress)."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r}: expected a positive number")
    out = JudgeScores({a: [] for a in aspects})
    for lo in range(0, len(items), chunk_size):
        part = list(items[lo : lo + chunk_size])
        results = judge.score(part, aspects=list(aspects))
        if len(results) != len(part):
            raise RuntimeError(f"judge.score returned {len(results)} results for {len(part)} items")
        for k, per_aspect in enumerate(results):
            for aspect in aspects:
                score = per_aspect.get(aspect)
                if score is None:
                    raise RuntimeError(f"judge.score gave no score for aspect {aspect!r} of item {lo + k}")
                out.scores[aspect].append(score.value)
                if score.value is None:
                    out.failures[score.reason or "unknown"] += 1
        if on_chunk is not None:
            on_chunk(lo + len(part))
    return out
