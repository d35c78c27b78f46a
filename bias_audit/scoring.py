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


@dataclass
class TextScore:
    """The judge's verdict on one text: one number (``None`` on failure, with the reason) plus per aspect."""

    value: float | None
    aspects: dict[str, float | None] = field(default_factory=dict)
    reason: str | None = None


def combine(judge, scores: dict[str, Score]) -> TextScore:
    """Mean over aspects. G-Eval and rating values stay on their scale when every aspect shares one
    (the paper's 1-5 units), else each is mapped onto [0, 1] first. GPTScore values are mean token
    log-probabilities and are averaged as they are.

    Any failed aspect fails the whole text: a mean over the aspects that happened to succeed would
    compare different things across texts.
    """
    per = {name: s.value for name, s in scores.items()}
    failed = [(name, s.reason) for name, s in scores.items() if s.value is None]
    if failed:
        name, reason = failed[0]
        return TextScore(None, per, f"{name}: {reason or 'unknown failure'}")
    if not per:
        return TextScore(None, per, "judge returned no aspects")
    method = getattr(getattr(judge, "config", None), "method", "geval")
    scales = {a.name: a.scale for a in getattr(judge, "aspects", []) if a.name in per}
    values = list(per.values())
    if method != "gptscore" and len(scales) == len(per) and len({s.values for s in scales.values()}) > 1:
        values = [scales[name].normalise(v) for name, v in per.items()]
    value = sum(values) / len(values)
    if not math.isfinite(value):
        return TextScore(None, per, "non-finite score")
    return TextScore(value, per)


def normalised(judge, value: float) -> float:
    """A combined score on [0, 1] where the method has a scale (G-Eval, rating); GPTScore as is."""
    method = getattr(getattr(judge, "config", None), "method", "geval")
    aspects = list(getattr(judge, "aspects", []))
    if method == "gptscore" or not aspects or len({a.scale.values for a in aspects}) > 1:
        return value
    return aspects[0].scale.normalise(value)


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
                ts = combine(judge, res)
                out[key] = ts
                if ts.value is None:
                    failures[ts.reason] += 1
            bar.update(len(part))
    return out, failures
