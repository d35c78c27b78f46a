"""Confidence intervals and significance tests for metric-human correlations.

* :func:`bootstrap_ci`: percentile bootstrap that resamples *groups* (documents / dialogue
  contexts), not items: the 16 summaries of one SummEval document share an article and are
  not independent, so resampling items would give intervals that are too narrow (the cluster
  bootstrap of :mod:`judge_reward.bootstrap`, on scipy.stats.bootstrap).
* :func:`williams_test`: does metric A correlate better with humans than metric B on the same
  items? Williams (1959) test for dependent correlations in the form of Graham & Baldwin (2014),
  as used by Chiang & Lee (2023). It is a test on Pearson's r over independent items.
* :func:`paired_bootstrap_test` and :func:`permutation_test`: the same question at any level and
  for any correlation, by resampling groups (Koehn 2004 style) or by randomly swapping the two
  metrics' standardised scores per item (Deutsch et al. 2021).

All resampling functions take a ``seed`` and are deterministic given it.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np
from scipy import stats

from ..bootstrap import Interval, cluster_bootstrap
from .correlation import _as_float_array, _check_method, correlate, level_value


class GroupedData:
    """Items of one metric/aspect pair, indexed by group, ready for fast resampling.

    ``group_order`` fixes the group indices that resample draws refer to; passing the same
    order for two metrics makes their draws identical (a paired bootstrap).
    """

    def __init__(self, metric, human, groups, systems=None, group_order: Sequence[Hashable] | None = None):
        m = _as_float_array(metric, "metric")
        h = _as_float_array(human, "human")
        if len(m) != len(h) or len(groups) != len(m):
            raise ValueError(f"lengths differ: metric {len(m)}, human {len(h)}, groups {len(groups)}")
        if systems is not None and len(systems) != len(m):
            raise ValueError(f"systems has {len(systems)} entries, metric has {len(m)}")
        keep = ~(np.isnan(m) | np.isnan(h))
        self.dropped = int((~keep).sum())
        order = list(dict.fromkeys(groups)) if group_order is None else list(group_order)
        index = {g: i for i, g in enumerate(order)}
        unknown = [g for g in groups if g not in index]
        if unknown:
            raise ValueError(f"group {unknown[0]!r} is not in group_order")
        self.group_order = order
        gid = np.array([index[g] for g in groups])
        self.metric, self.human, self.gid = m[keep], h[keep], gid[keep]
        if systems is not None:
            sys_names = list(dict.fromkeys(systems))
            sys_index = {s: i for i, s in enumerate(sys_names)}
            self.sid = np.array([sys_index[s] for s in systems])[keep]
            self.n_systems = len(sys_names)
        else:
            self.sid, self.n_systems = None, 0
        # item indices of each group (after dropping), in group_order
        self.members = [np.flatnonzero(self.gid == g) for g in range(len(order))]

    def with_metric(self, metric: np.ndarray) -> "GroupedData":
        """The same items and groups with other metric scores (aligned with the kept items)."""
        if len(metric) != len(self.metric):
            raise ValueError(f"with_metric: {len(metric)} scores for {len(self.metric)} items")
        other = copy.copy(self)
        other.metric = np.asarray(metric, dtype=float)
        return other

    @property
    def n_groups(self) -> int:
        return len(self.group_order)

    def per_group(self, method: str) -> np.ndarray:
        """Within-group correlation for each group (NaN where undefined)."""
        return np.array([correlate(self.metric[i], self.human[i], method) for i in self.members])

    def statistic(self, level: str, method: str, draw: np.ndarray | None = None, per_group=None) -> float:
        """The level's correlation on the groups in ``draw`` (all groups when None).

        A group drawn twice counts twice; at sample level its (already computed) within-group
        correlation enters the mean twice, which is what recomputing on relabelled copies gives.
        """
        if draw is None:
            draw = np.arange(self.n_groups)
        if level == "sample":
            values = (self.per_group(method) if per_group is None else per_group)[draw]
            values = values[~np.isnan(values)]
            return float(values.mean()) if len(values) else math.nan
        idx = np.concatenate([self.members[g] for g in draw]) if len(draw) else np.array([], dtype=int)
        if level == "dataset":
            return correlate(self.metric[idx], self.human[idx], method)
        if level == "system":
            if self.sid is None:
                raise ValueError("level='system' needs systems")
            sid = self.sid[idx]
            counts = np.bincount(sid, minlength=self.n_systems)
            present = counts > 0
            m = np.bincount(sid, self.metric[idx], self.n_systems)[present] / counts[present]
            h = np.bincount(sid, self.human[idx], self.n_systems)[present] / counts[present]
            return correlate(m, h, method)
        raise ValueError(f"level={level!r}: expected sample, dataset or system")

    def bootstrap(self, level: str, method: str, draws: np.ndarray) -> np.ndarray:
        """The statistic on each row of ``draws`` (shape: resamples x groups)."""
        _check_method(method)
        per_group = self.per_group(method) if level == "sample" else None
        return np.array([self.statistic(level, method, d, per_group) for d in draws])


def bootstrap_ci(
    metric,
    human,
    groups,
    level: str,
    method: str,
    systems=None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap CI of a level's correlation, resampling groups with replacement.

    For ``level="dataset"`` and ``"system"`` the groups are still what is resampled (e.g. the
    documents), with all their items; for ``"system"`` the system means are recomputed on
    each resample (Deutsch et al. 2021, "boot-inputs").
    """
    data = GroupedData(metric, human, groups, systems)
    value = level_value(level, metric, human, method, groups=groups, systems=systems)
    interval, _ = cluster_bootstrap(lambda draws: data.bootstrap(level, method, draws), data.n_groups, value,
                                    n_resamples, confidence, seed)
    return interval


@dataclass(frozen=True)
class WilliamsResult:
    """Williams test of H0: r(human, A) <= r(human, B), one-sided.

    ``r_a``/``r_b`` are Pearson correlations with humans, ``r_ab`` between the two metrics,
    ``n`` the number of items all three are computed on.
    """

    r_a: float
    r_b: float
    r_ab: float
    n: int
    t: float
    p_value: float


def williams_t(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' t and one-sided p for r12 > r13, given r23 (Graham & Baldwin 2014, eq. 3).

    ``r12``: metric A vs human, ``r13``: metric B vs human, ``r23``: A vs B; df = n - 3.
    """
    if n <= 3:
        raise ValueError(f"williams_t: n={n}; the test needs more than 3 items")
    for name, r in (("r12", r12), ("r13", r13), ("r23", r23)):
        if not -1 <= r <= 1:
            raise ValueError(f"williams_t: {name}={r!r} is not a correlation")
    det = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23  # |R| of the 3x3 correlation matrix
    if det < -1e-9:
        raise ValueError(f"williams_t: r12={r12!r}, r13={r13!r}, r23={r23!r} is not a correlation matrix")
    denom = math.sqrt(2 * max(det, 0.0) * (n - 1) / (n - 3) + ((r12 + r13) ** 2 / 4) * (1 - r23) ** 3)
    if denom == 0:  # r23 = 1 (the metrics are affinely related): the difference has no variance
        return math.nan, math.nan
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23)) / denom
    return t, float(stats.t.sf(t, df=n - 3))


def williams_test(metric_a, metric_b, human) -> WilliamsResult:
    """Does metric A correlate (Pearson) better with ``human`` than metric B on the same items?

    Items where either metric or the human score is missing are dropped from all three, so
    the three correlations are computed on the same items.
    """
    a = _as_float_array(metric_a, "metric_a")
    b = _as_float_array(metric_b, "metric_b")
    h = _as_float_array(human, "human")
    if not len(a) == len(b) == len(h):
        raise ValueError(f"lengths differ: metric_a {len(a)}, metric_b {len(b)}, human {len(h)}")
    keep = ~(np.isnan(a) | np.isnan(b) | np.isnan(h))
    a, b, h = a[keep], b[keep], h[keep]
    r_a, r_b, r_ab = correlate(a, h, "pearson"), correlate(b, h, "pearson"), correlate(a, b, "pearson")
    if abs(abs(r_ab) - 1.0) < 1e-12:  # affinely related metrics: rounding must not make the test defined
        r_ab = math.copysign(1.0, r_ab)
    if any(math.isnan(r) for r in (r_a, r_b, r_ab)):
        return WilliamsResult(r_a, r_b, r_ab, len(a), math.nan, math.nan)
    t, p = williams_t(r_a, r_b, r_ab, len(a))
    return WilliamsResult(r_a, r_b, r_ab, len(a), t, p)


@dataclass(frozen=True)
class PairedResult:
    """Result of a paired test of H0: metric A correlates no better than metric B.

    ``delta`` = corr(A) - corr(B) on the full data, ``ci`` its percentile bootstrap interval
    (paired bootstrap only), ``p_value`` one-sided for delta > 0.
    """

    test: str
    level: str
    method: str
    corr_a: float
    corr_b: float
    delta: float
    p_value: float
    ci: Interval | None
    n_resamples: int


def _aligned(metric_a, metric_b, human, groups, systems):
    a = _as_float_array(metric_a, "metric_a")
    b = _as_float_array(metric_b, "metric_b")
    h = _as_float_array(human, "human")
    if not len(a) == len(b) == len(h) == len(groups):
        raise ValueError(f"lengths differ: metric_a {len(a)}, metric_b {len(b)}, human {len(h)}, groups {len(groups)}")
    # compare on the items both metrics scored, as Williams' test does
    keep = ~(np.isnan(a) | np.isnan(b) | np.isnan(h))
    g = [x for x, k in zip(groups, keep) if k]
    s = None if systems is None else [x for x, k in zip(systems, keep) if k]
    return a[keep], b[keep], h[keep], g, s


def paired_bootstrap_test(
    metric_a,
    metric_b,
    human,
    groups,
    level: str = "sample",
    method: str = "spearman",
    systems=None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedResult:
    """Paired bootstrap over groups: both metrics see the same resampled documents.

    The p-value is the share of resamples where A does not beat B (delta <= 0), the usual
    one-sided paired-bootstrap estimate (Koehn 2004; Deutsch et al. 2021).
    """
    a, b, h, g, s = _aligned(metric_a, metric_b, human, groups, systems)
    order = list(dict.fromkeys(g))
    da, db = GroupedData(a, h, g, s, order), GroupedData(b, h, g, s, order)
    corr_a, corr_b = da.statistic(level, method), db.statistic(level, method)
    ci, deltas = cluster_bootstrap(  # both metrics on the same resampled groups
        lambda draws: da.bootstrap(level, method, draws) - db.bootstrap(level, method, draws),
        len(order), corr_a - corr_b, n_resamples, confidence, seed,
    )  # fmt: skip
    deltas = deltas[np.isfinite(deltas)]
    p = float(np.mean(deltas <= 0)) if len(deltas) else math.nan
    return PairedResult("paired_bootstrap", level, method, corr_a, corr_b, corr_a - corr_b, p, ci, len(deltas))


def _standardise(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else x - x.mean()


def permutation_test(
    metric_a,
    metric_b,
    human,
    groups,
    level: str = "sample",
    method: str = "spearman",
    systems=None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> PairedResult:
    """Paired permutation test: swap A's and B's scores on a random half of the items.

    Scores are z-standardised per metric first, so that swapping a ROUGE F1 for a 1-5 judge
    score is meaningful; under H0 the two metrics are exchangeable. The p-value counts the
    permutations whose delta is at least the observed one (with the +1 correction).
    """
    a, b, h, g, s = _aligned(metric_a, metric_b, human, groups, systems)
    a, b = _standardise(a), _standardise(b)
    base = GroupedData(a, h, g, s)  # group/system indices built once, metric swapped in below
    observed_a = base.statistic(level, method)
    observed_b = base.with_metric(b).statistic(level, method)
    observed = observed_a - observed_b
    if not math.isfinite(observed):  # a correlation is undefined: there is nothing to test
        return PairedResult("permutation", level, method, observed_a, observed_b, observed, math.nan, None, 0)
    rng = np.random.default_rng(seed)
    count, valid = 0, 0
    for _ in range(n_resamples):
        swap = rng.random(len(a)) < 0.5
        pa, pb = np.where(swap, b, a), np.where(swap, a, b)
        delta = base.with_metric(pa).statistic(level, method) - base.with_metric(pb).statistic(level, method)
        if math.isfinite(delta):
            valid += 1
            count += delta >= observed - 1e-12
    p = (count + 1) / (valid + 1) if valid else math.nan
    return PairedResult("permutation", level, method, observed_a, observed_b, observed, p, None, valid)
