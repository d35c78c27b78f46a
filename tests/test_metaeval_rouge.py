"""ROUGE baselines: multi-reference averaging, sentence splitting, and the SummEval reproduction."""

import time

import pytest
from rouge_score import rouge_scorer

from judge_reward.metaeval import MetaEvalConfig, evaluate, load_summeval
from judge_reward.metaeval.published import PUBLISHED_ROUGE_SUMMEVAL, compare_to_published
from judge_reward.metaeval.rouge import RougeConfig, rouge_scores, split_sentences


def test_split_sentences_on_standalone_full_stops():
    text = "Andros Townsend was a sub . He cost $ 3.5 m from the U.S. club . No final stop"
    assert split_sentences(text) == ["Andros Townsend was a sub .", "He cost $ 3.5 m from the U.S. club .", "No final stop"]
    assert split_sentences("  ") == []


def test_scores_are_the_mean_f1_over_references():
    output = "the cat sat on the mat . it was happy ."
    refs = ["a cat sat on a mat .", "the cat was happy on the mat . it sat .", "dogs bark ."]
    plain = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeLsum"], use_stemmer=True)
    expected = [plain.score(r.replace(" . ", " .\n"), output.replace(" . ", " .\n")) for r in refs]
    got = rouge_scores([output], [refs])
    for ours, theirs in (("rouge1", "rouge1"), ("rouge2", "rouge2"), ("rougeL", "rougeLsum")):
        f1 = [e[theirs].fmeasure for e in expected]
        assert got[ours][0] == pytest.approx(sum(f1) / 3)
        assert rouge_scores([output], [refs], RougeConfig(aggregate="max"))[ours][0] == pytest.approx(max(f1))
    # summary-level LCS differs from plain LCS once there is more than one sentence
    lcs = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    assert got["rougeL"][0] != pytest.approx(sum(lcs.score(r, output)["rougeL"].fmeasure for r in refs) / 3)


def test_rouge_input_errors():
    with pytest.raises(ValueError, match=r"references\[0\]: expected a non-empty list"):
        rouge_scores(["a"], ["a single string"])
    with pytest.raises(ValueError, match="differ in length"):
        rouge_scores(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match=r"types\[0\]: unknown value 'rouge3'"):
        RougeConfig(types=("rouge3",))


def test_rouge_reproduces_published_summeval_correlations(shared_data):
    """G-Eval Table 1 and Wang et al. 2023 Tables 1 and 6, within 0.003 (about 20-40 s on 2 CPUs)."""
    ds = load_summeval(shared_data / "summeval" / "summeval.json", shared_data / "summeval" / "references.json")
    start = time.perf_counter()
    metrics = rouge_scores([it.output for it in ds.items], ds.references)
    seconds = time.perf_counter() - start
    report = evaluate(
        metrics, {a: ds.human(a) for a in ds.aspects}, ds.groups, ds.systems,
        MetaEvalConfig(levels=("sample", "dataset"), n_bootstrap=0, compare=False), "summeval",
    )  # fmt: skip
    rows = compare_to_published(report)
    assert len(rows) == len(PUBLISHED_ROUGE_SUMMEVAL) == 40
    off = [r for r in rows if abs(r["diff"]) > 0.003 + 1e-9]
    assert not off, off
    print(f"ROUGE over 1600 x 11 pairs: {seconds:.1f}s")
