"""bias_audit: the data loader and the statistics, on the real study and on synthetic data with known answers."""

import json
import math

import numpy as np
import pytest

from judge_reward.bias_audit.data import DataError, load_held_out_articles, load_zhang2023, parse_preference
from judge_reward.bias_audit.stats import PairedRows, StatsConfig, analyse, leave_one_out_agreement, majority
from judge_reward.bias_audit.synthetic import SyntheticConfig, flag_rate, synthetic_rows


# -- data --------------------------------------------------------------------------------------


def test_loader_reads_the_whole_study(shared_data):
    study = load_zhang2023(shared_data / "zhang2023")
    counts = study.counts()
    assert counts["judgements"] == 599
    assert counts["preferences"] == {"human": 243, "llm": 239, "tie": 117}
    assert counts["pairs"] == 112 and counts["articles"] == 76 and counts["evaluators"] == 6
    assert len(study.llm_summaries) == 76
    held_out = load_held_out_articles(shared_data / "zhang2023", exclude=set(study.articles))
    assert len(held_out) == 33 and all(a.article_id not in study.articles for a in held_out)
    assert all(a.human_summaries for a in held_out)


def test_preferences_are_read_by_identity_not_truthiness():
    assert parse_preference(True, "x") == "human"
    assert parse_preference(False, "x") == "llm"
    assert parse_preference("Equally Good", "x") == "tie"
    for bad in (1, 0, "true", None, "equally good"):
        with pytest.raises(DataError, match=r"x: expected true, false"):
            parse_preference(bad, "x")


def _record(**over):
    rec = {"article_id": "a1", "writer_id": "w1", "evaluator_id": "e1", "article_text": "An article.",
           "writer_summary": "A summary.", "text-davinci-002_summary": "Another summary.",
           "overall_writer_better": True, "informative_writer_better": "Equally Good"}
    rec.update(over)
    return rec


def test_bad_records_name_the_record_field_and_value(tmp_path):
    path = tmp_path / "pairwise_evaluation_results.json"
    path.write_text(json.dumps([_record(), _record(evaluator_id="e2", overall_writer_better="yes")]))
    with pytest.raises(DataError, match=r"\[1\]\.overall_writer_better: expected .* got 'yes'"):
        load_zhang2023(tmp_path)
    path.write_text(json.dumps([_record(writer_summary="")]))
    with pytest.raises(DataError, match=r"\[0\]\.writer_summary: expected non-empty text, got ''"):
        load_zhang2023(path)
    path.write_text(json.dumps([_record(), _record(evaluator_id="e2", article_text="Different text.")]))
    with pytest.raises(DataError, match=r"\[1\]\.article_text: differs"):
        load_zhang2023(path)
    rec = _record()
    del rec["informative_writer_better"]
    path.write_text(json.dumps([rec]))
    with pytest.raises(DataError, match=r"\[0\]\.informative_writer_better: required field is missing"):
        load_zhang2023(path)
    with pytest.raises(DataError, match="does not exist"):
        load_zhang2023(tmp_path / "nowhere")


# -- statistics: inputs ------------------------------------------------------------------------


def test_rows_and_config_reject_bad_input():
    with pytest.raises(ValueError, match=r"preference: unknown value\(s\) \['maybe'\]"):
        PairedRows([0], [1.0], [2.0], [10], [10], ["maybe"])
    with pytest.raises(ValueError, match="llm: 1 rows, expected 2"):
        PairedRows([0, 1], [1.0, 2.0], [2.0], [10, 10], [10, 10], ["human", "llm"])
    with pytest.raises(ValueError, match="finite"):
        PairedRows([0], [math.nan], [2.0], [10], [10], ["human"])
    with pytest.raises(ValueError, match="stats.confidence: .* got 1.5"):
        StatsConfig(confidence=1.5)
    with pytest.raises(ValueError, match="stats.n_resamples"):
        StatsConfig(n_resamples=5)
    with pytest.raises(ValueError, match="rows: nothing to analyse"):
        analyse(PairedRows([], [], [], [], [], []))


# -- statistics: known answers ---------------------------------------------------------------

FAST = StatsConfig(n_resamples=300, n_permutations=1000)


def test_a_judge_that_always_prefers_the_llm_text_is_flagged():
    rows = synthetic_rows(SyntheticConfig(always_llm=True), seed=3)
    res = analyse(rows, FAST)
    sp = res["self_preference"]
    assert sp["llm_when_human"]["value"] == 1.0 and sp["human_when_llm"]["value"] == 0.0
    assert sp["index"]["value"] == 1.0
    assert sp["flagged"] and sp["p_value"] < 0.01
    assert res["pattern"]["same_as_paper"]
    assert set(res["pattern"]["llm_higher_significant_in"]) == {"human_better", "llm_better", "equally_good"}
    assert res["categories"]["human_better"]["agreement"]["value"] == 0.0
    assert res["categories"]["llm_better"]["agreement"]["value"] == 1.0


def test_an_unbiased_judge_is_flagged_at_most_at_the_stated_rate():
    """False-positive rate by simulation: 400 studies shaped like the real one, judge without bias.

    The flag is a one-sided test at alpha = 2.5%. With 400 studies the rate's standard error is
    0.8 points, so a correct test stays below 2.5% + 3 SE = 4.8% (and a test that ignored the
    article clustering, at about twice the nominal rate, would not).
    """
    rate = flag_rate(SyntheticConfig(), n_sims=400, stats=StatsConfig(n_resamples=100, n_permutations=1000))
    se = math.sqrt(0.025 * 0.975 / 400)
    assert rate <= 0.025 + 3 * se


def test_a_biased_judge_is_usually_flagged():
    # A bias of one quality SD: the judge adds to every LLM summary what separates good from average.
    rate = flag_rate(SyntheticConfig(judge_bias=1.0), n_sims=60, stats=StatsConfig(n_resamples=100, n_permutations=1000))
    assert rate >= 0.9


def test_a_constant_offset_is_recovered_in_every_category_with_a_degenerate_interval():
    rng = np.random.default_rng(0)
    n = 300
    cluster = rng.integers(0, 40, n)
    human = rng.normal(3, 0.5, n)
    rows = PairedRows(cluster, human, human + 0.25, rng.integers(30, 60, n), rng.integers(30, 60, n),
                      rng.choice(["human", "llm", "tie"], n))
    res = analyse(rows, FAST)
    for cat in res["categories"].values():
        d = cat["difference"]
        assert d["value"] == pytest.approx(0.25) and d["low"] == pytest.approx(0.25) and d["high"] == pytest.approx(0.25)
        assert cat["judge_prefers_llm"]["value"] == 1.0
    assert res["pattern"]["same_as_paper"]


def test_length_control_separates_a_length_bias_from_self_preference():
    """A judge that only rewards length, with LLM summaries 15 words longer: the raw difference is
    positive, the difference at equal length is not, and the slope is the judge's length effect."""
    cfg = SyntheticConfig(n_articles=200, llm_extra_words=15, score_per_10_words=0.5, judge_noise=0.5)
    rows = synthetic_rows(cfg, seed=1)
    res = analyse(rows, FAST)
    assert res["length"]["gap_words"]["value"] == pytest.approx(15, abs=3)
    assert res["length"]["slope_per_10_words"]["value"] == pytest.approx(0.5, abs=0.15)
    assert abs(res["length"]["controlled_difference"]["value"]) < 0.25
    assert res["categories"]["equally_good"]["difference"]["low"] > 0  # raw: the longer text wins
    assert res["self_preference"]["flagged"]
    matched = res["self_preference"]["length_matched"]
    assert matched["max_gap_words"] == 5 and 0 < matched["index"]["n"] < res["self_preference"]["index"]["n"]
    assert not matched["flagged"]


def test_paired_test_counts_articles_not_duplicated_rows():
    # 10 articles, each repeated 6 times (six evaluators of one pair): the test sees 10 differences.
    rng = np.random.default_rng(2)
    d = rng.normal(0.1, 0.2, 10)
    cluster = np.repeat(np.arange(10), 6)
    human = np.zeros(60)
    rows = PairedRows(cluster, human, np.repeat(d, 6), np.full(60, 40), np.full(60, 40), ["human"] * 60)
    test = analyse(rows, FAST)["categories"]["human_better"]["paired_test"]
    assert test["n_articles"] == 10
    from scipy.stats import wilcoxon

    assert test["p_value"] == pytest.approx(wilcoxon(d).pvalue)


def test_cluster_bootstrap_interval_covers_a_known_mean_at_about_its_level():
    """Coverage of the 95% interval for a mean difference with article-level effects (true value 0.2)."""
    hits, sims = 0, 150
    for s in range(sims):
        rng = np.random.default_rng(100 + s)
        art = rng.normal(0.2, 0.5, 60)  # article effects: rows of an article move together
        cluster = np.repeat(np.arange(60), 5)
        diff = art[cluster] + rng.normal(0, 0.2, 300)
        rows = PairedRows(cluster, np.zeros(300), diff, np.full(300, 40), np.full(300, 40), ["tie"] * 300)
        d = analyse(rows, StatsConfig(n_resamples=400, n_permutations=100, seed=s))["categories"]["equally_good"]["difference"]
        hits += d["low"] <= 0.2 <= d["high"]
    assert 0.88 <= hits / sims <= 0.99


def test_majority_and_leave_one_out_agreement():
    assert majority(["human", "human", "llm"]) == "human"
    assert majority(["human", "llm"]) is None
    assert majority(["tie", "tie", "llm", "human"]) == "tie"
    pair = np.array(["p"] * 4 + ["q"] * 3)
    pref = np.array(["human", "human", "human", "llm", "llm", "llm", "tie"], dtype=object)
    # p: the three "human" votes each see a 2-1 human majority among the others (agree); the "llm"
    # vote sees 3-0 human (disagree). q: each "llm" vote sees 1 llm + 1 tie -> llm majority (agree).
    out = leave_one_out_agreement(pair, pref)
    assert out == {"value": 5 / 6, "n": 6}
