"""Statistics for the self-preference audit.

Rows are comparisons: a human-written and an LLM-written summary of the same article, the judge's
score for each, their lengths, and what people preferred. Rows are not independent: every row of
an article shares its LLM summary, and a pair judged by six evaluators appears six times. All
intervals therefore come from a **cluster bootstrap that resamples articles** (all rows of a drawn
article come along), and the paired tests run on per-article mean differences.

Every statistic here is a smooth function of per-article sums (a mean is sum/count, an OLS fit is
five sums), so a resample's value is the statistic of the drawn articles' summed totals: thousands
of resamples cost milliseconds, which is what lets the tests check the false-positive rate of the
self-preference flag by simulation. The bootstrap is :func:`judge_reward.bootstrap.cluster_bootstrap`
(on scipy.stats.bootstrap), the one the meta-evaluation and the probe suite use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Callable, ClassVar

import numpy as np
from pydantic import Field
from scipy import stats as sps

from judge_reward.config import Expect, Section
from judge_reward.bootstrap import cluster_bootstrap, group_sums

from .data import CATEGORIES, HUMAN, LLM, TIE


Resamples = Annotated[int, Field(ge=100), Expect("an integer >= 100")]
Level = Annotated[float, Field(gt=0.5, lt=1), Expect("a level in (0.5, 1)")]
AtLeastZero = Annotated[float, Field(ge=0), Expect("a number >= 0")]


@dataclass
class StatsConfig(Section):
    """How the audit's numbers are computed (the ``stats:`` section of an audit config)."""

    section_path: ClassVar[str] = "stats"

    n_resamples: Resamples = 2000
    """Cluster-bootstrap resamples (articles drawn with replacement)."""
    n_permutations: Resamples = 4000
    """Random article flips for the self-preference test (its p-value's resolution is 1/(n+1))."""
    confidence: Level = 0.95
    """Two-sided level of every interval. The self-preference flag is a one-sided test at
    alpha = (1 - confidence) / 2, 2.5% by default (the same evidence as a lower bound above 0)."""
    seed: int = 0
    tie_margin: AtLeastZero = 0.0
    """The judge prefers a summary only when the score gap exceeds this (in the judge's units)."""
    length_match_words: AtLeastZero = 5
    """The length-matched self-preference figure uses comparisons whose summaries differ by at
    most this many words (about 30% of the Zhang et al. judgements at 5)."""


@dataclass
class PairedRows:
    """Comparisons to analyse (one per judgement, or one per (article, writer) pair)."""

    cluster: np.ndarray
    """Article of each row, as integer codes 0..n_articles-1."""
    human: np.ndarray
    llm: np.ndarray
    human_len: np.ndarray
    llm_len: np.ndarray
    preference: np.ndarray
    """``human``, ``llm`` or ``tie``: what people preferred."""

    def __post_init__(self):
        self.cluster = np.asarray(self.cluster, dtype=np.int64)
        for name in ("human", "llm", "human_len", "llm_len"):
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        self.preference = np.asarray(self.preference, dtype=object)
        n = len(self.cluster)
        for name in ("human", "llm", "human_len", "llm_len", "preference"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name}: {len(getattr(self, name))} rows, expected {n} (one per comparison)")
        bad = sorted({str(p) for p in self.preference} - {HUMAN, LLM, TIE})
        if bad:
            raise ValueError(f"preference: unknown value(s) {bad}; expected human, llm or tie")
        if n and not (np.isfinite(self.human).all() and np.isfinite(self.llm).all()):
            raise ValueError("human/llm: scores must be finite (drop failed judgements before the analysis)")

    def __len__(self) -> int:
        return len(self.cluster)

    @property
    def diff(self) -> np.ndarray:
        """Judge score of the LLM summary minus that of the human-written one."""
        return self.llm - self.human

    @property
    def len_gap(self) -> np.ndarray:
        return self.llm_len - self.human_len

    @property
    def n_clusters(self) -> int:
        return int(self.cluster.max()) + 1 if len(self.cluster) else 0


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its percentile cluster-bootstrap interval."""

    value: float | None
    low: float | None
    high: float | None
    n: int
    """Rows behind the point estimate."""

    def to_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


def _clean(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


class ClusterBootstrap:
    """Intervals from resamples of articles with replacement (all rows of a drawn article come along).

    Every estimate uses the same seed, so all of them come from the same resampled articles
    (:func:`judge_reward.bootstrap.cluster_bootstrap`). An estimate gets no interval when its
    statistic is undefined on half the resamples or more.
    """

    def __init__(self, cluster: np.ndarray, n_resamples: int, confidence: float, seed: int):
        self.cluster = np.asarray(cluster, dtype=np.int64)
        self.n_clusters = int(self.cluster.max()) + 1 if len(self.cluster) else 0
        self.n_resamples = n_resamples
        self.confidence = confidence
        self.seed = seed

    def estimate(self, columns: dict[str, np.ndarray], fn: Callable[..., np.ndarray], n: int) -> Estimate:
        """``fn(**totals)`` at the data and at every resample; ``columns`` are per-row values to sum."""
        per_cluster = {k: np.bincount(self.cluster, weights=v, minlength=self.n_clusters) for k, v in columns.items()}
        with np.errstate(divide="ignore", invalid="ignore"):
            value = fn(**{k: v.sum() for k, v in per_cluster.items()})
        if not math.isfinite(float(value)):
            return Estimate(_clean(value), None, None, n)
        interval, _ = cluster_bootstrap(lambda draws: self._totals(per_cluster, fn, draws), max(self.n_clusters, 1),
                                        float(value), self.n_resamples, self.confidence, self.seed)
        if interval.n_resamples < 0.5 * self.n_resamples:
            return Estimate(_clean(value), None, None, n)
        return Estimate(_clean(value), interval.low, interval.high, n)

    @staticmethod
    def _totals(per_cluster: dict[str, np.ndarray], fn: Callable[..., np.ndarray], draws: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(fn(**{k: group_sums(v, draws) for k, v in per_cluster.items()}), dtype=np.float64)

    def mean(self, x: np.ndarray, mask: np.ndarray) -> Estimate:
        m = mask.astype(np.float64)
        return self.estimate({"s": x * m, "n": m}, lambda s, n: s / n, int(mask.sum()))

    def ols(self, x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> tuple[Estimate, Estimate]:
        """Intercept and slope of y = a + b x over the masked rows."""
        m = mask.astype(np.float64)
        cols = {"n": m, "sx": x * m, "sy": y * m, "sxx": x * x * m, "sxy": x * y * m}

        def intercept(n, sx, sy, sxx, sxy):
            return (sy * sxx - sx * sxy) / (n * sxx - sx * sx)

        def slope(n, sx, sy, sxx, sxy):
            return (n * sxy - sx * sy) / (n * sxx - sx * sx)

        k = int(mask.sum())
        return self.estimate(cols, intercept, k), self.estimate(cols, slope, k)


def judge_choice(diff: np.ndarray, margin: float) -> np.ndarray:
    """+1 where the judge prefers the LLM summary, -1 the human one, 0 within the tie margin."""
    return np.where(diff > margin, 1, np.where(diff < -margin, -1, 0))


def paired_test(rows: PairedRows, mask: np.ndarray) -> dict:
    """Wilcoxon signed-rank (and a t-test) on per-article mean differences LLM - human.

    Per article, not per row: rows of one article share texts, so treating them as independent
    pairs would overstate the evidence.
    """
    d = rows.diff[mask]
    codes = rows.cluster[mask]
    if len(d) == 0:
        return {"test": "wilcoxon", "n_articles": 0, "statistic": None, "p_value": None, "t_p_value": None}
    uniq, inv = np.unique(codes, return_inverse=True)
    per_article = np.bincount(inv, weights=d) / np.bincount(inv)
    out = {"test": "wilcoxon signed-rank on per-article mean differences", "n_articles": int(len(uniq)),
           "statistic": None, "p_value": None, "t_p_value": None}
    if len(per_article) >= 2 and np.any(per_article != 0):
        w = sps.wilcoxon(per_article)
        out["statistic"], out["p_value"] = _clean(w.statistic), _clean(w.pvalue)
        if np.std(per_article) > 1e-9 * max(1.0, abs(float(per_article.mean()))):  # constant: no t statistic
            out["t_p_value"] = _clean(sps.ttest_1samp(per_article, 0.0).pvalue)
    return out


def _rate_difference(a1, n1, a2, n2):
    return a1 / n1 - a2 / n2


def sign_flip_test(choice: np.ndarray, pref: np.ndarray, cluster: np.ndarray, n_permutations: int, seed: int) -> dict:
    """One-sided test of "no self-preference" by swapping the two sources' roles, whole articles at a time.

    Null hypothesis: within an article, the joint distribution of the judge's choices and people's
    preferences does not change when the LLM and human summaries swap labels (the judge treats the
    sources alike, and so do people). Under it, flipping an article (judge prefers LLM <-> human,
    people prefer LLM <-> human) leaves the data's distribution unchanged, so the index's
    randomisation distribution gives an exact level: the flag's false-positive rate is at most
    alpha whatever the judge's accuracy, the number of evaluators or the article structure.
    """
    ph, pl = pref == HUMAN, pref == LLM
    jl, jh = choice > 0, choice < 0
    c = int(cluster.max()) + 1

    def per(x):
        return np.bincount(cluster, weights=x.astype(np.float64), minlength=c)

    a_hl, n_h, a_lh, n_l = per(jl & ph), per(ph), per(jh & pl), per(pl)
    rng = np.random.default_rng(seed)
    flip = rng.integers(0, 2, size=(n_permutations, c)).astype(np.float64)
    keep = 1.0 - flip
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = a_hl.sum() / n_h.sum() - a_lh.sum() / n_l.sum()
        null = (keep @ a_hl + flip @ a_lh) / (keep @ n_h + flip @ n_l) - (keep @ a_lh + flip @ a_hl) / (keep @ n_l + flip @ n_h)
    null = np.where(np.isfinite(null), null, -np.inf)  # an undefined draw never counts as extreme
    if not math.isfinite(observed):
        return {"p_value": None, "n_permutations": n_permutations}
    p = (1 + int(np.sum(null >= observed - 1e-12))) / (1 + n_permutations)
    return {"p_value": float(p), "n_permutations": n_permutations}


def self_preference(bs: ClusterBootstrap, choice: np.ndarray, pref: np.ndarray, cluster: np.ndarray,
                    alpha: float, n_permutations: int, seed: int, mask: np.ndarray | None = None) -> dict:
    """How often the judge prefers the LLM summary when people preferred the human one (``llm_when_human``)
    against how often it prefers the human one when people preferred the LLM one (``human_when_llm``).

    The index is their difference: 0 in expectation for a judge without self-preference when people's
    preferences are balanced between the sources (in this data 243 vs 239), whatever its accuracy,
    since both are error rates of the same judge on mirrored cases; 1 for a judge that always
    prefers the LLM text. The interval is the cluster bootstrap's; the flag is the sign-flip test's
    (:func:`sign_flip_test`), whose false-positive rate is exactly ``alpha``. ``mask`` restricts
    everything to some rows (the length-matched comparisons).
    """
    mask = np.ones(len(pref), dtype=bool) if mask is None else mask
    ph, pl = ((pref == HUMAN) & mask).astype(float), ((pref == LLM) & mask).astype(float)
    jl, jh = (choice > 0).astype(float), (choice < 0).astype(float)
    e1 = bs.mean(jl, ph > 0)
    e2 = bs.mean(jh, pl > 0)
    cols = {"a1": jl * ph, "n1": ph, "a2": jh * pl, "n2": pl}
    index = bs.estimate(cols, _rate_difference, int(ph.sum() + pl.sum()))
    if ph.sum() and pl.sum():
        test = sign_flip_test(choice[mask], pref[mask], cluster[mask], n_permutations, seed)
    else:
        test = {"p_value": None}
    return {
        "llm_when_human": e1.to_dict(),
        "human_when_llm": e2.to_dict(),
        "index": index.to_dict(),
        "test": "sign-flip permutation over articles, one-sided",
        "p_value": test["p_value"],
        "n_permutations": n_permutations,
        "alpha": alpha,
        "flagged": bool(test["p_value"] is not None and test["p_value"] < alpha),
    }


def category_stats(rows: PairedRows, bs: ClusterBootstrap, mask: np.ndarray, category: str, margin: float) -> dict:
    pref = CATEGORIES[category][0]
    d, gap = rows.diff, rows.len_gap
    choice = judge_choice(d, margin)
    intercept, slope = bs.ols(gap / 10.0, d, mask)  # slope per 10 words reads better than per word
    out = {
        "category": category,
        "label": CATEGORIES[category][1],
        "n": int(mask.sum()),
        "n_articles": int(len(np.unique(rows.cluster[mask]))),
        "human_mean": bs.mean(rows.human, mask).to_dict(),
        "llm_mean": bs.mean(rows.llm, mask).to_dict(),
        "difference": bs.mean(d, mask).to_dict(),
        "paired_test": paired_test(rows, mask),
        "judge_prefers_llm": bs.mean((choice > 0).astype(float), mask).to_dict(),
        "judge_prefers_human": bs.mean((choice < 0).astype(float), mask).to_dict(),
        "judge_ties": int(((choice == 0) & mask).sum()),
        "agreement": None,
        "length": {
            "human_words": bs.mean(rows.human_len, mask).to_dict(),
            "llm_words": bs.mean(rows.llm_len, mask).to_dict(),
            "gap_words": bs.mean(gap, mask).to_dict(),
        },
        "length_controlled_difference": intercept.to_dict(),
        "length_slope_per_10_words": slope.to_dict(),
    }
    if pref != TIE:
        agree = (choice == (1 if pref == LLM else -1)).astype(float)
        out["agreement"] = bs.mean(agree, mask).to_dict()
    return out


def analyse(rows: PairedRows, config: StatsConfig | None = None) -> dict:
    """Every number of the audit for one set of rows: per category, agreement, self-preference, length."""
    config = config or StatsConfig()
    if len(rows) == 0:
        raise ValueError("rows: nothing to analyse (every judgement failed or the data is empty)")
    bs = ClusterBootstrap(rows.cluster, config.n_resamples, config.confidence, config.seed)
    pref, d, gap = rows.preference, rows.diff, rows.len_gap
    choice = judge_choice(d, config.tie_margin)
    categories = {name: category_stats(rows, bs, pref == p, name, config.tie_margin) for name, (p, _) in CATEGORIES.items()}
    strict = pref != TIE
    agree = ((choice > 0) & (pref == LLM)) | ((choice < 0) & (pref == HUMAN))
    everything = np.ones(len(rows), dtype=bool)
    intercept, slope = bs.ols(gap / 10.0, d, everything)
    spi = self_preference_test(rows, config, bs)
    directions = [categories[c]["difference"]["value"] for c in CATEGORIES]
    lows = [categories[c]["difference"]["low"] for c in CATEGORIES]
    return {
        "n": len(rows),
        "n_articles": int(len(np.unique(rows.cluster))),
        "categories": categories,
        "agreement": bs.mean(agree.astype(float), strict).to_dict(),
        "self_preference": spi,
        "length": {
            "gap_words": bs.mean(gap, everything).to_dict(),
            "corr_diff_gap": _clean(np.corrcoef(d, gap)[0, 1]) if np.std(d) > 0 and np.std(gap) > 0 else None,
            "controlled_difference": intercept.to_dict(),
            "slope_per_10_words": slope.to_dict(),
        },
        "pattern": {
            # The G-Eval paper: GPT-4 scored the GPT-3.5 summaries higher in all three categories.
            "llm_higher_in": [c for c, v in zip(CATEGORIES, directions) if v is not None and v > 0],
            "llm_higher_significant_in": [c for c, lo in zip(CATEGORIES, lows) if lo is not None and lo > 0],
            "same_as_paper": all(v is not None and v > 0 for v in directions),
        },
    }


def self_preference_test(rows: PairedRows, config: StatsConfig | None = None, bs: ClusterBootstrap | None = None) -> dict:
    """The self-preference figure on all comparisons, and on the length-matched ones only.

    Length matching (the two summaries differ by at most ``config.length_match_words`` words) is
    the length control for the *test*: the subset is chosen by |length gap|, which swapping the
    sources leaves unchanged, so the sign-flip test stays exact on it. (Adjusting each difference
    by a fitted length slope would not: the slope's own error would leak into the flag.)
    """
    config = config or StatsConfig()
    bs = bs or ClusterBootstrap(rows.cluster, config.n_resamples, config.confidence, config.seed)
    alpha = (1 - config.confidence) / 2
    choice = judge_choice(rows.diff, config.tie_margin)
    args = (bs, choice, rows.preference, rows.cluster, alpha, config.n_permutations, config.seed)
    out = self_preference(*args)
    matched = np.abs(rows.len_gap) <= config.length_match_words
    out["length_matched"] = {"max_gap_words": config.length_match_words, **self_preference(*args, mask=matched)}
    return out


def leave_one_out_agreement(pair: np.ndarray, pref: np.ndarray) -> dict:
    """How often one evaluator's strict preference matches the majority of the other evaluators of
    the same pair (their strict preferences only; pairs without a strict majority are skipped).

    A ceiling of sorts for the judge-human agreement: people agree with each other this often.
    """
    pair = np.asarray(pair)
    pref = np.asarray(pref, dtype=object)
    agree = total = 0
    for p in np.unique(pair):
        labels = pref[pair == p]
        for k, mine in enumerate(labels):
            if mine == TIE:
                continue
            others = np.delete(labels, k)
            h, l = int((others == HUMAN).sum()), int((others == LLM).sum())
            if h == l:
                continue
            total += 1
            agree += int(mine == (HUMAN if h > l else LLM))
    return {"value": agree / total if total else None, "n": total}


def majority(labels) -> str | None:
    """The most frequent preference of a pair's evaluators; ``None`` when two labels tie for most."""
    counts = {p: list(labels).count(p) for p in (HUMAN, LLM, TIE)}
    top = max(counts.values())
    winners = [p for p, c in counts.items() if c == top]
    return winners[0] if len(winners) == 1 else None
