"""Run a judge over a dataset's items and collect its scores per aspect (and, given a
:class:`~judge_reward.reward.Reward`, the reward a trainer would get for each item).

The judge is anything with ``score(items, aspects=[...]) -> list[dict[aspect, Score]]``
(:class:`judge_reward.Judge`, or a stand-in in tests). A failed judgment (``Score.value is
None``) or reward (``RewardResult.value is None``) stays ``None``:
:func:`~judge_reward.metaeval.report.evaluate` drops and counts it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..methods.base import Item


@dataclass
class JudgeScores:
    """Scores per aspect aligned with the items, and why the failed ones failed; with a reward,
    each item's reward and why the ``None`` ones are ``None``."""

    scores: dict[str, list[float | None]]
    failures: Counter = field(default_factory=Counter)
    rewards: list[float | None] | None = None
    reward_failures: Counter = field(default_factory=Counter)


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
    reward=None,
) -> JudgeScores:
    """Score ``items`` on ``aspects`` in chunks (``on_chunk(n_done)`` reports progress).

    With ``reward`` (a :class:`~judge_reward.reward.Reward` on the same judge) each item's reward
    is computed too, from the same judge call where the reward's guards leave the texts as they
    are; the judge's scores are always of the texts as given.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r}: expected a positive number")
    out = JudgeScores({a: [] for a in aspects}, rewards=None if reward is None else [])
    for lo in range(0, len(items), chunk_size):
        part = list(items[lo : lo + chunk_size])
        if reward is None:
            results = judge.score(part, aspects=list(aspects))
        else:
            results, rewarded = _score_and_reward(judge, reward, part, aspects)
            for result in rewarded:
                out.rewards.append(result.value)
                if result.value is None:
                    out.reward_failures[result.reason or "unknown"] += 1
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


def _score_and_reward(judge, reward, part: list[Item], aspects: Sequence[str]):
    """The judge's scores of ``part`` and the reward's results for it. One judge call covers both
    where the reward reads the judge's method; only the items whose text the reward's input guards
    rewrote are judged again, for the reward, with the value-echo guard's masked copies."""
    batch = reward.plan(part)
    same_method = reward.method_name == judge.config.method
    wanted = list(dict.fromkeys([*aspects, *reward.aspect_names])) if same_method else list(aspects)
    results = judge.score(part, aspects=wanted)
    redo = [k for k in batch.todo if not same_method or batch.judged[k] != part[k]]
    todo = [batch.judged[k] for k in redo] + batch.masked_items
    again = judge.score(todo, aspects=reward.aspect_names, method=reward.method_name) if todo else []
    rescored = dict(zip(redo, again))
    return results, batch.finish([rescored.get(k, results[k]) for k in batch.todo] + list(again[len(redo):]))
