"""Correlation levels: values against scipy and hand computation, skipping and dropping rules."""

import math

import numpy as np
import pytest
from scipy import stats

from judge_reward.metaeval import correlate, dataset_level, drop_missing, per_group, sample_level, system_level


@pytest.mark.parametrize("seed", range(5))
def test_correlate_equals_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 6, 40).astype(float)  # 1-5 ratings: many ties, as in SummEval
    y = x + rng.integers(-2, 3, 40)
    assert correlate(x, y, "pearson") == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert correlate(x, y, "spearman") == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    # Kendall must be tau-b (the tie-corrected one scipy defaults to), not tau-a
    assert correlate(x, y, "kendall") == pytest.approx(stats.kendalltau(x, y, variant="b")[0], abs=1e-12)
    assert correlate(x, y, "kendall") != pytest.approx(stats.kendalltau(x, y, variant="c")[0], abs=1e-6)


def test_kendall_by_hand():
    # pairs of (1,2,3,4) vs (1,3,2,4): 5 concordant, 1 discordant, no ties -> (5-1)/6
    assert correlate([1, 2, 3, 4], [1, 3, 2, 4], "kendall") == pytest.approx(4 / 6)


def test_undefined_cases_are_nan():
    assert math.isnan(correlate([1.0], [2.0], "pearson"))
    assert math.isnan(correlate([], [], "spearman"))
    assert math.isnan(correlate([3, 3, 3], [1, 2, 3], "kendall"))
    assert math.isnan(correlate([1, 2, 3], [2, 2, 2], "spearman"))
    with pytest.raises(ValueError, match="method='tau'"):
        correlate([1, 2], [1, 2], "tau")
    with pytest.raises(ValueError, match=r"x\[1\]='high' is not a number"):
        correlate([1, "high"], [1, 2], "pearson")


def test_missing_metric_scores_are_dropped_and_counted():
    metric = [1.0, None, 3.0, float("nan"), 5.0]
    human = [1.0, 9.0, 2.0, 9.0, 4.0]
    cleaned = drop_missing(metric, human, ["a", "b", "c", "d", "e"])
    assert cleaned.dropped == 2
    assert cleaned.metric.tolist() == [1.0, 3.0, 5.0]
    assert list(cleaned.keys) == ["a", "c", "e"]
    # the dropped items (human 9, 9) would otherwise dominate the correlation
    assert dataset_level(metric, human, "pearson") == pytest.approx(stats.pearsonr([1, 3, 5], [1, 2, 4])[0])


def test_sample_level_skips_constant_and_tiny_groups():
    groups = ["d1"] * 3 + ["d2"] * 3 + ["d3"] * 3 + ["d4"] * 3 + ["d5"]
    metric = [1, 2, 3, 3, 2, 1, 5, 5, 5, 1, 2, 3, 7]  # d3: metric constant
    human = [1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 4, 4, 7]  # d4: human constant; d5: one item
    per = per_group(metric, human, groups, "spearman")
    assert per["d1"] == pytest.approx(1.0) and per["d2"] == pytest.approx(-1.0)
    assert all(math.isnan(per[g]) for g in ("d3", "d4", "d5"))
    # mean of the defined groups only, not (1 - 1 + 0 + 0 + 0) / 5
    assert sample_level(metric, human, groups, "spearman") == pytest.approx(0.0)
    metric[3:6] = [1, 2, 3]
    assert sample_level(metric, human, groups, "spearman") == pytest.approx(1.0)


def test_sample_level_matches_a_plain_loop():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(10), 16)
    human = rng.integers(1, 6, 160).astype(float)
    metric = human + rng.normal(0, 2, 160)
    expected = np.mean([stats.kendalltau(metric[groups == g], human[groups == g])[0] for g in range(10)])
    assert sample_level(metric, human, groups.tolist(), "kendall") == pytest.approx(expected, abs=1e-12)


def test_system_level_correlates_system_means():
    systems = ["A", "B", "C", "A", "B", "C"]
    metric = [1.0, 2.0, 6.0, 3.0, 4.0, 2.0]  # means A 2, B 3, C 4
    human = [5.0, 1.0, 2.0, 5.0, 1.0, 4.0]  # means A 5, B 1, C 3
    assert system_level(metric, human, systems, "pearson") == pytest.approx(stats.pearsonr([2, 3, 4], [5, 1, 3])[0])
    # a dropped item changes its system's mean: C is then 6 alone
    metric[5] = None
    assert system_level(metric, human, systems, "pearson") == pytest.approx(stats.pearsonr([2, 3, 6], [5, 1, 2])[0])


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="differ in length"):
        dataset_level([1, 2, 3], [1, 2], "pearson")
    with pytest.raises(ValueError, match="groups/systems has 2 entries"):
        sample_level([1, 2, 3], [1, 2, 3], ["a", "b"], "pearson")
