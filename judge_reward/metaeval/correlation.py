"""Correlations between metric scores and human scores at the three levels the papers report.

* dataset level: one correlation over all items (Wang et al. 2023, Table 6).
* sample level ("summary-level"): one correlation per group (SummEval document, Topical-Chat
  context) over its items, averaged over the groups where neither side is constant (G-Eval Table 1).
* system level: the mean score of each system, correlated across systems.

Missing metric scores (``None`` / NaN: the judge failed) drop the whole item from every level;
the number dropped is reported, never silently imputed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np
from scipy import stats

METHODS = ("pearson", "spearman", "kendall")
LEVELS = ("sample", "dataset", "system")


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method={method!r}: expected one of {', '.join(METHODS)}")


def _as_float_array(values: Sequence, name: str) -> np.ndarray:
    """Values as a float array, None -> NaN; a non-number is an error naming its index."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return values
    if not any(isinstance(v, (str, bytes)) for v in values):
        try:  # fast path; np.asarray turns None into NaN
            return np.asarray(values, dtype=float).reshape(len(values))
        except (TypeError, ValueError):
            pass  # fall through to report the first bad value
    out = np.empty(len(values), dtype=float)
    for i, v in enumerate(values):
        if v is None:
            out[i] = np.nan
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name}[{i}]={v!r} is not a number") from None
    return out


def correlate(x, y, method: str) -> float:
    """Pearson r, Spearman rho or Kendall tau-b between ``x`` and ``y``, as scipy.stats defines them.

    Pairs where either value is None/NaN are dropped. Returns NaN when fewer than two pairs
    remain or either side is constant: the correlation is undefined there, and the caller
    decides whether to skip it (sample level) or report it.
    """
    _check_method(method)
    x = _as_float_array(x, "x")
    y = _as_float_array(y, "y")
    if len(x) != len(y):
        raise ValueError(f"x and y differ in length: {len(x)} vs {len(y)}")
    keep = ~(np.isnan(x) | np.isnan(y))  # missing pairs are dropped (drop_missing counts them)
    x, y = x[keep], y[keep]
    if len(x) < 2:
        return math.nan
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    if method == "kendall":
        return float(stats.kendalltau(x, y)[0])
    if method == "spearman":
        # what scipy.stats.spearmanr computes (Pearson on average ranks), without its per-call
        # overhead, which dominates when bootstrapping thousands of small correlations
        x, y = stats.rankdata(x), stats.rankdata(y)
    return _pearson(x, y)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r of two non-constant arrays (agrees with scipy.stats.pearsonr to ~1e-15)."""
    xm, ym = x - x.mean(), y - y.mean()
    r = float(np.dot(xm, ym) / (np.linalg.norm(xm) * np.linalg.norm(ym)))
    return max(-1.0, min(1.0, r))  # rounding can push |r| a hair above 1


@dataclass(frozen=True)
class Cleaned:
    """Aligned arrays after dropping items whose metric (or human) score is missing."""

    metric: np.ndarray
    human: np.ndarray
    keys: np.ndarray | None  # groups or systems, aligned with metric/human; None if not given
    dropped: int


def drop_missing(metric, human, keys=None) -> Cleaned:
    """Drop items whose metric or human score is None/NaN; return the rest and how many went."""
    m = _as_float_array(metric, "metric")
    h = _as_float_array(human, "human")
    if len(m) != len(h):
        raise ValueError(f"metric and human differ in length: {len(m)} vs {len(h)}")
    if keys is not None and len(keys) != len(m):
        raise ValueError(f"groups/systems has {len(keys)} entries, metric has {len(m)}")
    keep = ~(np.isnan(m) | np.isnan(h))
    k = None
    if keys is not None:
        k = np.empty(len(keys), dtype=object)
        k[:] = list(keys)
        k = k[keep]
    return Cleaned(m[keep], h[keep], k, int((~keep).sum()))


def dataset_level(metric, human, method: str) -> float:
    """One correlation over all items (missing metric scores dropped)."""
    c = drop_missing(metric, human)
    return correlate(c.metric, c.human, method)


def _group_indices(keys: np.ndarray) -> dict[Hashable, np.ndarray]:
    order: dict[Hashable, list[int]] = {}
    for i, k in enumerate(keys):
        order.setdefault(k, []).append(i)
    return {k: np.asarray(v) for k, v in order.items()}


def per_group(metric, human, groups, method: str) -> dict[Hashable, float]:
    """Correlation within each group; NaN where the group has <2 items or a constant side."""
    c = drop_missing(metric, human, groups)
    return {g: correlate(c.metric[idx], c.human[idx], method) for g, idx in _group_indices(c.keys).items()}


def sample_level(metric, human, groups, method: str) -> float:
    """Summary-level correlation: per group, skipping undefined groups, then the mean.

    G-Eval (nlpyang/geval) skips documents whose human *or* metric scores are constant; we do
    the same, so a group contributes only when its correlation is defined.
    """
    vals = [r for r in per_group(metric, human, groups, method).values() if not math.isnan(r)]
    return float(np.mean(vals)) if vals else math.nan


def system_means(metric, human, systems) -> tuple[list, np.ndarray, np.ndarray]:
    """Per-system mean metric and human score (over the items that were not dropped)."""
    c = drop_missing(metric, human, systems)
    idx = _group_indices(c.keys)
    names = list(idx)
    return (
        names,
        np.array([c.metric[i].mean() for i in idx.values()]),
        np.array([c.human[i].mean() for i in idx.values()]),
    )


def system_level(metric, human, systems, method: str) -> float:
    """Mean per system, then one correlation across the systems."""
    _, m, h = system_means(metric, human, systems)
    return correlate(m, h, method)


def level_value(level: str, metric, human, method: str, groups=None, systems=None) -> float:
    """Dispatch to one of the three levels by name (used by the report and the bootstrap)."""
    if level == "dataset":
        return dataset_level(metric, human, method)
    if level == "sample":
        if groups is None:
            raise ValueError("level='sample' needs groups (e.g. doc_id per item)")
        return sample_level(metric, human, groups, method)
    if level == "system":
        if systems is None:
            raise ValueError("level='system' needs systems (system_id per item)")
        return system_level(metric, human, systems, method)
    raise ValueError(f"level={level!r}: expected one of {', '.join(LEVELS)}")
