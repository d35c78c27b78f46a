"""Bootstrap CIs, Williams test, paired bootstrap and permutation tests."""

import math

import numpy as np
import pytest
from scipy import stats

from judge_reward.metaeval import (
    bootstrap_ci,
    dataset_level,
    paired_bootstrap_test,
    permutation_test,
    sample_level,
    system_level,
    williams_t,
    williams_test,
)
from judge_reward.bootstrap import cluster_bootstrap, group_sums
from judge_reward.metaeval.significance import GroupedData


def test_williams_t_by_hand():
    # r12=.5, r13=.3, r23=.4, n=100, by hand:
    # |R| = 1 - .25 - .09 - .16 + 2(.5)(.3)(.4) = .62
    # t = .2 * sqrt(99 * 1.4) / sqrt(2(.62)(99/97) + (.8^2 / 4)(.6^3)) = 2.35457 / 1.14023 = 2.0650
    t, p = williams_t(0.5, 0.3, 0.4, 100)
    assert t == pytest.approx(2.0650, abs=1e-4)
    assert p == pytest.approx(1 - stats.t.cdf(2.0650, df=97), abs=1e-4)  # one-sided, df = n - 3
    assert p == pytest.approx(0.0208, abs=5e-4)
    t_rev, p_rev = williams_t(0.3, 0.5, 0.4, 100)
    assert t_rev == pytest.approx(-t) and p_rev == pytest.approx(1 - p)


def test_williams_t_rejects_bad_input():
    with pytest.raises(ValueError, match="n=3"):
        williams_t(0.5, 0.3, 0.4, 3)
    with pytest.raises(ValueError, match="r23=1.5"):
        williams_t(0.5, 0.3, 1.5, 50)

def test_williams_test_on_affinely_related_metrics_does_not_crash():
    # a reward that is a rescaled judge score: r_ab rounds to exactly 1.0, the test is undefined
    rng = np.random.default_rng(0)
    human = rng.integers(1, 6, 40).astype(float)
    a = human + rng.normal(0, 1, 40)
    res = williams_test(a, 0.1 * a - 3, human)
    assert res.r_ab == 1.0
    assert math.isnan(res.t) and math.isnan(res.p_value)
    t, p = williams_t(0.9, 0.9, 1.0, 40)
    assert math.isnan(t) and math.isnan(p)
    with pytest.raises(ValueError, match="correlation matrix"):
        williams_t(0.9, 0.8, 1.0, 40)  # no three variables have these correlations
    from judge_reward.metaeval.report import MetaEvalConfig, evaluate

    groups = [f"d{i // 4}" for i in range(40)]
    report = evaluate({"judge": list(a), "reward": list(0.1 * a - 3)}, {"coh": list(human)}, groups,
                      config=MetaEvalConfig(n_bootstrap=0))  # fmt: skip
    assert math.isnan(report.comparisons[0].williams.p_value)


def test_williams_test_uses_pearson_on_common_items():
    rng = np.random.default_rng(0)
    human = rng.normal(size=80)
    a = human + rng.normal(0, 0.7, 80)
    b = human + rng.normal(0, 1.5, 80)
    a_missing = a.copy()
    a_missing[:5] = np.nan  # dropped from all three correlations
    res = williams_test(a_missing, b, human)
    keep = slice(5, None)
    assert res.n == 75
    assert res.r_a == pytest.approx(stats.pearsonr(a[keep], human[keep])[0])
    assert res.r_b == pytest.approx(stats.pearsonr(b[keep], human[keep])[0])
    assert res.r_ab == pytest.approx(stats.pearsonr(a[keep], b[keep])[0])
    assert (res.t, res.p_value) == pytest.approx(williams_t(res.r_a, res.r_b, res.r_ab, 75))
    assert res.p_value < 0.05


def _pearson_rows(x, y):
    xm, ym = x - x.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
    return (xm * ym).sum(1) / np.sqrt((xm**2).sum(1) * (ym**2).sum(1))


def test_williams_test_is_calibrated_under_the_null():
    # two metrics with the same true correlation to humans: a correct test rejects ~5% at alpha=.05
    rng = np.random.default_rng(0)
    sims, n = 3000, 60
    h = rng.normal(size=(sims, n))
    shared = rng.normal(size=(sims, n))  # the metrics also correlate with each other, as real ones do
    a = h + shared + rng.normal(0, 1, (sims, n))
    b = h + shared + rng.normal(0, 1, (sims, n))
    r12, r13, r23 = _pearson_rows(a, h), _pearson_rows(b, h), _pearson_rows(a, b)
    p = np.array([williams_t(x, y, z, n)[1] for x, y, z in zip(r12, r13, r23)])
    assert 0.035 < np.mean(p < 0.05) < 0.065
    # and it has power when A really is better
    better = h + shared + rng.normal(0, 0.3, (sims, n))
    p_alt = np.array([williams_t(x, y, z, n)[1] for x, y, z in zip(_pearson_rows(better, h), r13, _pearson_rows(better, b))])
    assert np.mean(p_alt < 0.05) > 0.5


def _toy(seed=0, n_groups=12, per_group=6):
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"d{g}" for g in range(n_groups)], per_group).tolist()
    systems = [f"s{k}" for _ in range(n_groups) for k in range(per_group)]
    human = rng.integers(1, 6, n_groups * per_group).astype(float)
    metric = human + rng.normal(0, 1.5, len(human))
    return metric, human, groups, systems


def test_resampled_statistic_equals_recomputation_on_relabelled_copies():
    metric, human, groups, systems = _toy()
    data = GroupedData(metric, human, groups, systems)
    draw = np.array([3, 3, 0, 7, 11, 11, 11, 2, 5, 5, 9, 1])  # groups drawn twice and thrice
    idx, new_groups = [], []
    for copy, g in enumerate(draw):
        members = [i for i, x in enumerate(groups) if x == f"d{g}"]
        idx += members
        new_groups += [f"copy{copy}"] * len(members)  # a group drawn twice is two groups
    m, h, s = metric[idx], human[idx], [systems[i] for i in idx]
    for method in ("pearson", "spearman", "kendall"):
        assert data.statistic("sample", method, draw) == pytest.approx(sample_level(m, h, new_groups, method))
        assert data.statistic("dataset", method, draw) == pytest.approx(dataset_level(m, h, method))
        assert data.statistic("system", method, draw) == pytest.approx(system_level(m, h, s, method))


def test_bootstrap_ci_matches_scipy_bootstrap_at_item_level():
    # with one item per group, resampling groups is scipy's paired bootstrap of items
    rng = np.random.default_rng(3)
    human = rng.normal(size=60)
    metric = human + rng.normal(0, 1.2, 60)
    ours = bootstrap_ci(metric, human, list(range(60)), "dataset", "pearson", n_resamples=4000, seed=1)
    ref = stats.bootstrap(
        (metric, human), lambda x, y: stats.pearsonr(x, y)[0], paired=True, vectorized=False,
        n_resamples=4000, method="percentile", random_state=np.random.default_rng(2),
    ).confidence_interval  # fmt: skip
    assert ours.value == pytest.approx(stats.pearsonr(metric, human)[0])
    assert ours.low == pytest.approx(ref.low, abs=0.025)
    assert ours.high == pytest.approx(ref.high, abs=0.025)
    assert ours.n_resamples == 4000


def test_sample_level_ci_is_the_bootstrap_of_the_mean_of_group_correlations():
    metric, human, groups, _ = _toy(seed=4, n_groups=30)
    per = GroupedData(metric, human, groups).per_group("spearman")
    ours = bootstrap_ci(metric, human, groups, "sample", "spearman", n_resamples=4000, seed=0)
    ref = stats.bootstrap((per[~np.isnan(per)],), np.mean, n_resamples=4000, method="percentile",
                          random_state=np.random.default_rng(5)).confidence_interval  # fmt: skip
    assert ours.low == pytest.approx(ref.low, abs=0.02)
    assert ours.high == pytest.approx(ref.high, abs=0.02)
    assert ours.low < ours.value < ours.high


def test_bootstrap_is_deterministic_and_narrows_with_more_groups():
    small = _toy(seed=5, n_groups=8)
    big = _toy(seed=5, n_groups=80)
    a = bootstrap_ci(*small[:3], "dataset", "kendall", n_resamples=300, seed=7)
    assert a == bootstrap_ci(*small[:3], "dataset", "kendall", n_resamples=300, seed=7)
    b = bootstrap_ci(*big[:3], "dataset", "kendall", n_resamples=300, seed=7)
    assert (b.high - b.low) < (a.high - a.low)


def test_cluster_bootstrap_draws_are_scipys_and_undefined_resamples_are_left_out():
    seen = []

    def total(draws):
        seen.append(draws)
        return draws.sum(1).astype(float)

    ci, samples = cluster_bootstrap(total, 5, 10.0, n_resamples=200, seed=0)
    draws = np.concatenate(seen)
    assert draws.shape == (200, 5) and draws.min() == 0 and draws.max() == 4
    assert (draws == np.random.default_rng(0).integers(0, 5, (200, 5))).all()  # deterministic given the seed
    assert (ci.low, ci.high) == pytest.approx(tuple(np.quantile(samples, [0.025, 0.975])))
    assert ci.value == 10.0 and ci.n_resamples == 200
    # a resample without group 0 is undefined: the interval is that of the others (scipy alone gives NaN)
    per_group = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    rate = lambda d: np.where((d == 0).any(1), group_sums(per_group, d), np.nan)  # noqa: E731
    ci, samples = cluster_bootstrap(rate, 5, 15.0, n_resamples=300, seed=1)
    defined = samples[np.isfinite(samples)]
    assert 0 < ci.n_resamples == len(defined) < 300
    assert (ci.low, ci.high) == pytest.approx(tuple(np.quantile(defined, [0.025, 0.975])))
    one = cluster_bootstrap(lambda d: group_sums(per_group[:1], d), 1, 1.0, n_resamples=20)[0]
    assert (one.low, one.high, one.n_resamples) == (1.0, 1.0, 20)  # one group: every resample is that group


def test_paired_tests_detect_a_better_metric_and_not_a_tie():
    rng = np.random.default_rng(6)
    groups = np.repeat(np.arange(25), 8).tolist()
    human = rng.normal(size=200)
    good = human + rng.normal(0, 0.5, 200)
    noise = rng.normal(size=200) * 10 + 50  # a different scale: the permutation test standardises
    for test in (paired_bootstrap_test, permutation_test):
        forward = test(good, noise, human, groups, "sample", "spearman", n_resamples=300, seed=0)
        backward = test(noise, good, human, groups, "sample", "spearman", n_resamples=300, seed=0)
        assert forward.delta > 0.3
        assert forward.p_value < 0.01
        assert backward.p_value > 0.9
        tie = test(good, good, human, groups, "dataset", "pearson", n_resamples=100, seed=0)
        assert tie.delta == 0 and tie.p_value == 1.0


def test_paired_bootstrap_delta_ci_and_system_level():
    metric, human, groups, systems = _toy(seed=8, n_groups=20)
    worse = metric + np.random.default_rng(9).normal(0, 3, len(metric))
    res = paired_bootstrap_test(metric, worse, human, groups, "system", "pearson", systems, n_resamples=200)
    assert res.corr_a == pytest.approx(system_level(metric, human, systems, "pearson"))
    assert res.ci.low <= res.delta <= res.ci.high
    assert not math.isnan(res.p_value)


def test_permutation_test_with_an_undefined_observed_delta_gives_no_p_value():
    # metric A constant (a judge that always says 3): its correlation, hence delta, is undefined;
    # the test must not report the smallest possible p-value for it
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(6), 4).tolist()
    human = rng.integers(1, 6, 24).astype(float)
    constant = np.full(24, 3.0)
    other = human + rng.normal(0, 1, 24)
    for level in ("sample", "dataset"):
        res = permutation_test(constant, other, human, groups, level, "spearman", n_resamples=199, seed=0)
        assert math.isnan(res.delta)
        assert math.isnan(res.p_value)
        assert res.n_resamples == 0
