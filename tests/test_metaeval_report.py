"""evaluate(): the structured report shared by the CLI, the benchmark and the callback."""

import json
import math

import numpy as np
import pytest
from rich.console import Console

from judge_reward.metaeval import (
    MetaEvalConfig,
    bootstrap_ci,
    dataset_level,
    evaluate,
    paired_bootstrap_test,
    sample_level,
    system_level,
    williams_test,
)


def _data(seed=0, n_groups=10, per_group=5):
    rng = np.random.default_rng(seed)
    n = n_groups * per_group
    groups = np.repeat([f"d{g}" for g in range(n_groups)], per_group).tolist()
    systems = [f"s{k}" for _ in range(n_groups) for k in range(per_group)]
    human = {"fluency": rng.integers(1, 6, n).astype(float).tolist(), "relevance": rng.normal(size=n).tolist()}
    judge = {a: (np.array(v) + rng.normal(0, 1, n)).tolist() for a, v in human.items()}
    judge["fluency"][3] = None  # a failed judgment
    baseline = rng.normal(size=n).tolist()  # one list for every aspect, like ROUGE
    return {"judge": judge, "baseline": baseline}, human, groups, systems


def test_values_equal_the_level_functions_and_cis_the_group_bootstrap():
    metrics, human, groups, systems = _data()
    cfg = MetaEvalConfig(n_bootstrap=200, seed=3)
    report = evaluate(metrics, human, groups, systems, cfg, "toy")
    assert report.metrics == ["judge", "baseline"] and report.aspects == ["fluency", "relevance"]
    assert (report.n_items, report.n_groups, report.n_systems) == (50, 10, 5)
    fl = report.result("judge", "fluency")
    assert fl.dropped == 1 and fl.n_items == 49
    m, h = metrics["judge"]["fluency"], human["fluency"]
    for method in ("pearson", "spearman", "kendall"):
        assert fl.get("sample", method).value == pytest.approx(sample_level(m, h, groups, method))
        assert fl.get("dataset", method).value == pytest.approx(dataset_level(m, h, method))
        assert fl.get("system", method).value == pytest.approx(system_level(m, h, systems, method))
    ci = bootstrap_ci(m, h, groups, "dataset", "kendall", n_resamples=200, seed=3)
    cell = fl.get("dataset", "kendall")
    assert (cell.ci_low, cell.ci_high) == pytest.approx((ci.low, ci.high))
    assert cell.n == 49 and fl.get("system", "pearson").n == 5
    assert report.value("baseline", "relevance", "dataset", "pearson") == pytest.approx(
        dataset_level(metrics["baseline"], human["relevance"], "pearson")
    )


def test_comparisons_use_williams_and_the_paired_bootstrap():
    metrics, human, groups, systems = _data(seed=1)
    report = evaluate(metrics, human, groups, systems, MetaEvalConfig(n_bootstrap=100))
    assert [(c.aspect, c.metric_a, c.metric_b) for c in report.comparisons] == [
        ("fluency", "judge", "baseline"), ("relevance", "judge", "baseline")
    ]  # fmt: skip
    c = report.comparisons[0]
    w = williams_test(metrics["judge"]["fluency"], metrics["baseline"], human["fluency"])
    assert (c.williams.t, c.williams.n) == (pytest.approx(w.t), 49)
    pb = paired_bootstrap_test(metrics["judge"]["fluency"], metrics["baseline"], human["fluency"], groups,
                               "sample", "spearman", systems, 100)  # fmt: skip
    assert c.paired_bootstrap.p_value == pytest.approx(pb.p_value)


def test_judge_with_only_some_aspects_and_no_systems():
    metrics, human, groups, _ = _data()
    metrics["judge"].pop("relevance")
    report = evaluate(metrics, human, groups, None, MetaEvalConfig(n_bootstrap=0))
    assert [(r.metric, r.aspect) for r in report.results] == [
        ("judge", "fluency"), ("baseline", "fluency"), ("baseline", "relevance")
    ]  # fmt: skip
    assert report.config.levels == ("sample", "dataset")  # no systems given
    assert [c.aspect for c in report.comparisons] == ["fluency"]
    assert math.isnan(report.result("judge", "fluency").get("sample", "pearson").ci_low)


def test_json_is_strict_and_nan_becomes_null(tmp_path):
    metrics, human, groups, systems = _data()
    metrics["constant"] = [1.0] * 50  # every correlation undefined
    report = evaluate(metrics, human, groups, systems, MetaEvalConfig(n_bootstrap=20))
    path = tmp_path / "r.json"
    report.save_json(path)
    data = json.loads(path.read_text())  # allow_nan=False on write: this is strict JSON
    const = [r for r in data["results"] if r["metric"] == "constant"][0]
    assert all(c["value"] is None for c in const["cells"])
    assert data["config"]["n_bootstrap"] == 20 and data["n_items"] == 50
    assert len(report.rows()) == 3 * 2 * 3 * 3
    assert report.flat()["metaeval/judge/fluency/sample/spearman"] == report.value("judge", "fluency", "sample", "spearman")


def test_render_prints_a_table_per_aspect():
    metrics, human, groups, systems = _data()
    console = Console(record=True, width=200)
    report = evaluate(metrics, human, groups, systems, MetaEvalConfig(n_bootstrap=50), "toy")
    report.render(console)
    text = console.export_text()
    assert "toy: fluency (50 items, 10 groups)" in text and "toy: relevance" in text
    v = report.result("judge", "relevance").get("dataset", "spearman")
    assert f"{v.value:.3f} [{v.ci_low:.3f}, {v.ci_high:.3f}]" in text
    assert "Williams t=" in text


def test_input_errors_name_the_problem():
    metrics, human, groups, systems = _data()
    with pytest.raises(ValueError, match="metric 'baseline', aspect 'fluency': 49 scores for 50 items"):
        evaluate({"baseline": metrics["baseline"][:-1]}, human, groups)
    with pytest.raises(ValueError, match="has scores for none of the aspects"):
        evaluate({"judge": {"style": [1.0] * 50}}, human, groups)
    with pytest.raises(ValueError, match=r"levels\[0\]: unknown value 'document'"):
        MetaEvalConfig(levels=("document",))
    with pytest.raises(ValueError, match="systems: 3 values for 50 items"):
        evaluate(metrics, human, groups, ["a", "b", "c"])


def test_an_interval_from_fewer_resamples_says_how_many():
    """Three documents, two with a constant judge: a resample of only those has no sample-level
    correlation. The interval comes from the rest, and the report says so instead of hiding it."""
    rng = np.random.default_rng(1)
    groups = np.repeat(["d0", "d1", "d2"], 5).tolist()
    human = {"fluency": rng.normal(size=15).tolist()}
    judge = [3.0] * 10 + rng.normal(size=5).tolist()  # d0 and d1 constant
    cfg = MetaEvalConfig(n_bootstrap=200, levels=("sample",), methods=("spearman",))
    report = evaluate({"judge": {"fluency": judge}}, human, groups, None, cfg, "toy")
    cell = report.result("judge", "fluency").get("sample", "spearman")
    assert 0 < cell.ci_resamples < 200  # ~ (2/3)^3 of the draws hold no d2
    assert report.to_dict()["results"][0]["cells"][0]["ci_resamples"] == cell.ci_resamples
    console = Console(record=True, width=200)
    report.render(console)
    text = console.export_text()
    assert f"{cell.value:.3f} [{cell.ci_low:.3f}, {cell.ci_high:.3f}]*" in text
    assert f"* interval from fewer than 200 resamples (as few as {cell.ci_resamples})" in text
    full = evaluate({"judge": {"fluency": rng.normal(size=15).tolist()}}, human, groups, None, cfg, "toy")
    assert full.result("judge", "fluency").get("sample", "spearman").ci_resamples == 200
