"""Score texts with a judge, each distinct (source, text) once, and reduce aspects to one number.

Shared by the audit and the training monitor. A judge here is anything with the
:class:`judge_reward.Judge` interface: ``score(items) -> [{aspect: Score}]``, ``aspects`` and
``config.method``.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from tqdm.auto import tqdm

from judge_reward.methods.base import Item, Score
from judge_reward.reward import Reward, RewardConfig


@dataclass
class TextScore:
    """The judge's verdict on one text: one number (``None`` on failure, with the reason) plus per aspect."""

    value: float | None
    aspects: dict[str, float | None] = field(default_factory=dict)
    reason: str | None = None


def audit_reward(judge) -> Reward:
    """The number the audit compares texts by, through the one reward definition
    (:class:`judge_reward.reward.Reward`): the mean over the judge's aspects, every aspect failing
    the text if it fails (a mean over the aspects that happened to succeed would compare different
    things across texts). G-Eval and rating values stay on their scale when every aspect shares one
    (the paper's 1-5 units), else each is mapped onto [0, 1]; GPTScore values are mean token
    log-probabilities, as they are. No guards: the audit measures the judge's own preference
    between honest texts.
    """
    method = judge.config.method
    scales = {a.scale.values for a in judge.aspects}
    normalise = "none" if method == "gptscore" or len(scales) <= 1 else "unit"
    return Reward(judge, RewardConfig(aspects=[a.name for a in judge.aspects], normalise=normalise, partial="fail"))


def combine(reward: Reward, scores: dict[str, Score]) -> TextScore:
    """One text's :class:`TextScore` from its aspect scores under ``reward``."""
    per = {name: s.value for name, s in scores.items()}
    if not per:
        return TextScore(None, per, "judge returned no aspects")
    result = reward.combine(scores)
    if result.value is None:
        reason = result.reason or "unknown failure"
        if len(reward.aspects) == 1:  # the audit always names the aspect
            reason = f"{reward.aspects[0].name}: {reason}"
        return TextScore(None, per, reason)
    if not math.isfinite(result.value):
        return TextScore(None, per, "non-finite score")
    return TextScore(result.value, per)


def score_texts(
    judge,
    texts: Iterable[tuple[str, str]],
    *,
    chunk_sources: int = 8,
    progress: bool = True,
    desc: str = "judge",
) -> tuple[dict[tuple[str, str], TextScore], Counter]:
    """Score every distinct ``(source, text)`` once; returns the scores and failure counts by reason.

    Texts of one source go into the same ``judge.score`` call, so the backend runs the shared
    prompt part (the article) once for all of them. Calls are made ``chunk_sources`` sources at a
    time, which is what the progress bar counts.
    """
    by_source: dict[str, list[str]] = {}
    for source, text in texts:
        bucket = by_source.setdefault(source, [])
        if text not in bucket:
            bucket.append(text)
    sources = list(by_source)
    reward = audit_reward(judge)
    out: dict[tuple[str, str], TextScore] = {}
    failures: Counter = Counter()
    total = sum(len(v) for v in by_source.values())
    with tqdm(total=total, desc=desc, unit="text", disable=not progress or total < 2) as bar:
        for lo in range(0, len(sources), max(1, chunk_sources)):
            part: list[tuple[str, str]] = [(s, t) for s in sources[lo:lo + chunk_sources] for t in by_source[s]]
            items: Sequence[Item] = [Item(output=t, source=s) for s, t in part]
            results = judge.score(items)
            if len(results) != len(items):
                raise RuntimeError(f"judge.score returned {len(results)} results for {len(items)} items")
            for key, res in zip(part, results):
                ts = combine(reward, res)
                out[key] = ts
                if ts.value is None:
                    failures[ts.reason] += 1
            bar.update(len(part))
    return out, failures
