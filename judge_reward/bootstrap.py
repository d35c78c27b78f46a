"""The cluster bootstrap, written once, on :func:`scipy.stats.bootstrap`.

Items of one group are not independent: the 16 summaries of one SummEval document share an article,
the rows of one audit article share its LLM summary, the probes of one source share that source.
So every interval in this project resamples *groups* with replacement, each with all its items:
scipy resamples the group indices ``0 .. n_groups-1`` and the caller's ``statistic`` turns a block
of resampled index rows (shape ``(resamples, n_groups)``) into one value per row. Used by the
meta-evaluation (:mod:`judge_reward.metaeval.significance`), the probe suite
(:mod:`judge_reward.probes`) and the self-preference audit (``judge_reward.bias_audit.stats``).

Deterministic given ``seed``: the draws are scipy's, ``numpy.random.default_rng(seed).integers(0,
n_groups, (n_resamples, n_groups))``, so two statistics bootstrapped with the same seed over the same
groups see the same resampled groups (a paired bootstrap).

The interval is scipy's percentile interval. A resample on which the statistic is undefined (NaN or
infinite: a correlation of constant scores, a rate with no rows) is left out of the interval and of
the count of valid resamples, where scipy would return a NaN interval; a single group (which scipy
refuses) gives the statistic of that group on every resample.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats

__all__ = ["Interval", "cluster_bootstrap", "group_sums"]


@dataclass(frozen=True)
class Interval:
    """A percentile bootstrap interval around ``value``; ``n_resamples`` counts the valid ones."""

    value: float
    low: float
    high: float
    confidence: float
    n_resamples: int


def cluster_bootstrap(
    statistic: Callable[[np.ndarray], np.ndarray],
    n_groups: int,
    value: float,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[Interval, np.ndarray]:
    """The percentile interval of ``statistic`` over resamples of ``n_groups`` groups, and the
    bootstrap distribution (one value per resample, NaN where the statistic is undefined).

    ``statistic(draws)``: ``draws`` is an integer array of shape ``(k, n_groups)``, each row the
    indices of the groups one resample drew (a group drawn twice counts twice); it returns ``k``
    values. ``value``: the statistic on the data, carried into the :class:`Interval`.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence!r}: expected a number between 0 and 1")
    if n_groups < 1 or n_resamples < 1:
        raise ValueError(f"cluster_bootstrap: needs at least one group and one resample, got {n_groups} and {n_resamples}")
    result = None
    if n_groups == 1:  # scipy wants two observations; every resample is the one group
        samples = np.asarray(statistic(np.zeros((n_resamples, 1), dtype=np.int64)), dtype=np.float64)
    else:
        # an undefined resample makes scipy's interval and standard error NaN: the interval is handled below
        with warnings.catch_warnings(), np.errstate(invalid="ignore", over="ignore"):
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            result = stats.bootstrap(
                (np.arange(n_groups),), lambda draws, axis=-1: statistic(np.atleast_2d(draws)), vectorized=True,
                n_resamples=n_resamples, confidence_level=confidence, method="percentile",
                rng=np.random.default_rng(seed),
            )  # fmt: skip
        samples = np.asarray(result.bootstrap_distribution, dtype=np.float64)
    finite = samples[np.isfinite(samples)]
    if len(finite) == 0:
        low = high = math.nan
    elif result is not None and len(finite) == len(samples):
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    else:  # scipy's percentile interval (linear interpolation) over the defined resamples only
        alpha = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(finite, [alpha, 1 - alpha]))
    return Interval(value, low, high, confidence, len(finite)), samples


def group_sums(per_group: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Per resample, the sum over the drawn groups of a per-group total (``per_group[draws].sum(-1)``):
    how a ratio of sums (a mean over items, a rate, an OLS fit) is recomputed on each resample."""
    return np.asarray(per_group, dtype=np.float64)[draws].sum(axis=-1)
