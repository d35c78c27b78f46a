"""Rating parser: one test group per rule, adversarial cases, and the acceptance test of the
project -- Chiang & Lee (2023) Topical-Chat correlations reproduced from their released outputs
(reads JSON only: a few seconds)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from judge_reward.aspects import Scale
from judge_reward.parsing import parse_rating, parse_samples

ONE_FIVE = (1, 5)
ONE_THREE = (1, 3)
BINARY = (0, 1)


def value(text, scale=ONE_FIVE, style=None):
    parsed = parse_rating(text, scale, style)
    assert (parsed.value is None) == (parsed.reason is not None), parsed
    return parsed.value


# --- rule 1: labelled -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, scale, expected",
    [
        ("Rating: 3", ONE_FIVE, 3),
        ("Score: 80", (0, 100), 80),
        ("Coherence: 3", ONE_THREE, 3),
        ("- Naturalness: 2", ONE_THREE, 2),
        ("Overall rating: 4", ONE_FIVE, 4),
        ("1. Engagingness: 2", ONE_THREE, 2),  # the list marker is not the rating
        ("**Rating:** 1", ONE_FIVE, 1),
        ("Coherence (1-3): 2", ONE_THREE, 2),  # the scale in parentheses is not the rating
        ("Rating:\n3", ONE_FIVE, 3),
        ("Rating:\nCoherence: 2", ONE_THREE, 2),
        ("Rating: 3 (good)\nRationale: flows well.", ONE_THREE, 3),
        ("Rating: 2.\nRationale: ...", ONE_THREE, 2),
        ("Analysis: The response does not mention the fact. Rating: 0", BINARY, 0),  # inline label
        ("Response: 2", ONE_THREE, 2),
    ],
)
def test_labelled(text, scale, expected):
    parsed = parse_rating(text, scale)
    assert parsed.value == expected
    assert parsed.rule == "labelled"


def test_the_last_rating_label_is_the_one_committed_to():
    assert value("Rating: 2\nOn reflection the flow is fine.\nFinal rating: 4") == 4


def test_a_rating_label_beats_an_aspect_label_before_it():
    assert value("Coherence: 2\nRating: 3", ONE_THREE) == 3


def test_analysis_mentioning_numbers_is_not_a_rating():
    text = "Analysis: the response mentions 3 facts, 2 of them from 1995.\nRating: 0"
    assert value(text, BINARY) == 0


def test_an_analysis_with_numbers_and_no_rating_is_a_failure():
    parsed = parse_rating("Analysis: 3 of the 4 facts are used in the reply.", ONE_FIVE)
    assert parsed.value is None and parsed.reason == "no rating found"


def test_explanation_labels_are_never_read():
    # "Rationale: 4" is an explanation label; the committed rating is the earlier "Rating: 2".
    assert value("Rating: 2\nRationale: 4 of the sentences are off topic.") == 2
    assert value("Fact: 84 per cent of genes ...\n\n- Groundedness: 0", BINARY) == 0


def test_a_fraction_in_the_text_does_not_beat_a_label():
    assert value("The summary covers 3/5 of the key points.\nRating: 4") == 4


# --- rule 2: leading --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2", 2),
        ("  2 \n", 2),
        ("2.5", 2.5),
        ("2.", 2),
        ("2. Somewhat", 2),
        ("3 (good)", 3),
        ("- 2", 2),
        ("1. 2", 2),  # numbered-list marker before the answer
        ("2. The response is a bit strange, and 1 sentence is off.", 2),
        ("2\nRationale: the reply ignores 3 earlier turns.", 2),
    ],
)
def test_leading(text, expected):
    parsed = parse_rating(text, ONE_THREE)
    assert parsed.value == expected
    assert parsed.rule == "leading"


def test_several_bare_ratings_are_a_failure_not_a_guess():
    parsed = parse_rating("1. 1\n2. 3\n3. 2", ONE_THREE)
    assert parsed.value is None
    assert parsed.reason == "several ratings: 1, 3, 2"


def test_a_numbered_question_is_not_a_rating():
    parsed = parse_rating("1. Does the response follow on from the history?\nIt does not.", ONE_THREE)
    assert parsed.value is None


def test_a_minus_sign_is_not_a_bullet():
    parsed = parse_rating("-1", ONE_FIVE)
    assert parsed.value is None and parsed.reason == "out of scale: -1 not in 1-5"


# --- rule 3: stated ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The response is off topic. I would rate it a 1.", 1),
        ("This response would receive a score of 2. It shifts the topic.", 2),
        ("Therefore, the groundedness score is 0.", 0),
        ("This would be rated as a 3.", 3),
    ],
)
def test_stated(text, expected):
    parsed = parse_rating(text, (0, 3))
    assert parsed.value == expected
    assert parsed.rule == "stated"


@pytest.mark.parametrize(
    "text",
    [
        "4. Assign a rating score of 1, 2, or 3 based on the evaluation.",  # echoed steps
        "A score of 1 means that the response is unnatural.",  # echoed criteria
    ],
)
def test_mentions_of_the_scale_are_not_statements(text):
    assert value(text, ONE_THREE) is None


# --- rule 4: fraction -------------------------------------------------------------------------


def test_fraction_and_out_of():
    assert value("4/5") == 4
    assert value("4 out of 5") == 4
    assert value("Fluent and on topic; I'd give it 4 out of 5.") == 4
    # A fraction over another maximum is a mention; the one over the scale's top is the rating.
    assert value("It covers 1/3 of the facts. Overall 2/5.") == 2


def test_a_fraction_over_another_maximum_is_a_failure():
    parsed = parse_rating("Rating: 8/10", ONE_FIVE)
    assert parsed.value is None and parsed.reason == "different scale: 8/10 on a 1-5 scale"


# --- rule 5: stars ----------------------------------------------------------------------------


def test_stars():
    assert value("★★★★", style="stars") == 4
    assert value("★★★★☆", style="stars") == 4
    assert value("I award it ★★★ for clarity.", style="stars") == 3
    assert value("4 stars", style="stars") == 4
    assert value("It deserves 2 stars.", style="stars") == 2


def test_star_glyphs_are_only_read_for_the_stars_style():
    assert value("Great reply ★★★", style="rate_explain") is None
    assert value("Great reply ★★★") == 3  # no style given: every rule applies


# --- rule 6: trailing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, scale, expected",
    [
        ("Good (3)", ONE_THREE, 3),
        ("The response does not use the fact. 0", BINARY, 0),
        ("The response is natural.\n3", ONE_THREE, 3),
        ("The response does not mention the fact at all. - 0", BINARY, 0),
    ],
)
def test_trailing(text, scale, expected):
    parsed = parse_rating(text, scale)
    assert parsed.value == expected
    assert parsed.rule == "trailing"


def test_a_number_inside_the_last_sentence_is_not_a_rating():
    assert value("The club was founded in 1995.") is None
    assert value("They played 3") is None


# --- checks, failures, scales -----------------------------------------------------------------


def test_out_of_scale_is_rejected_not_clipped():
    parsed = parse_rating("Rating: 7", ONE_FIVE)
    assert parsed.value is None and parsed.reason == "out of scale: 7 not in 1-5"
    assert value("Rating: 0", ONE_FIVE) is None
    assert parse_rating("Rating: 3.5", ONE_THREE).reason == "out of scale: 3.5 not in 1-3"


def test_a_longer_number_is_not_read_as_its_first_digit():
    assert parse_rating("Rating: 30", ONE_FIVE).reason == "out of scale: 30 not in 1-5"
    assert value("The 3rd reply was better.") is None


def test_decimals_between_scale_points_are_kept():
    assert value("Rating: 2.5", ONE_THREE) == 2.5
    assert value("0.5", BINARY) == 0.5
    assert value("Rating: 2.08888", ONE_THREE) == pytest.approx(2.08888)


def test_a_range_is_not_one_rating():
    parsed = parse_rating("Rating: 2-3", ONE_THREE)
    assert parsed.value is None and parsed.reason.startswith("a range, not one rating")


@pytest.mark.parametrize("text", ["", "   \n ", None])
def test_empty(text):
    assert parse_rating(text, ONE_FIVE).reason == "empty response"


@pytest.mark.parametrize("text", ["Good", "Yes", "N/A", "Rating: \n\nRationale: it is fine.", "I'm sorry, I can't help."])
def test_words_are_never_turned_into_numbers(text):
    parsed = parse_rating(text, ONE_THREE)
    assert parsed.value is None and parsed.reason == "no rating found" and parsed.rule is None


def test_scale_object_and_pair_agree():
    scale = Scale.from_config({"min": 1, "max": 5}, "test")
    for text in ("Rating: 4", "7", "2.5", "★★"):
        assert parse_rating(text, scale) == parse_rating(text, (1, 5))


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="style='likert'"):
        parse_rating("3", ONE_FIVE, style="likert")
    with pytest.raises(ValueError, match="below low"):
        parse_rating("3", (5, 1))
    with pytest.raises(ValueError, match="expected a Scale"):
        parse_rating("3", "1-5")


def test_parse_samples_counts_and_averages():
    samples = parse_samples(["Rating: 3", "2", "Good", "Rating: 9", "Rating: 2"], ONE_THREE, "rate_explain")
    assert samples.ratings == [3, 2, 2]
    assert samples.parsed == 3 and samples.failed == 2
    assert samples.mean == pytest.approx(7 / 3)
    assert samples.failure_reasons == {"no rating found": 1, "out of scale: 9 not in 1-3": 1}
    assert samples.rules == {"labelled": 2, "leading": 1}
    assert parse_samples(["Good"], ONE_THREE).mean is None


# --- acceptance: Chiang & Lee (2023) from their released outputs ------------------------------


def _benchmark_module():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "closer_look_parsing.py"
    spec = importlib.util.spec_from_file_location("closer_look_parsing", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


bench = _benchmark_module()


@pytest.fixture(scope="module")
def reproduction(shared_data):
    return bench.evaluate_all(shared_data)


# The released all_eval.py reads the first number of a response. In 10 gro_geval responses (9 echo
# the input, "Fact: 84 per cent of genes ...", one answers "3") it reads 2, 3, 4, 8 or 9 on the 0-1
# scale; those items' means leave the scale and move tau by about 0.02. With those 10 read as we
# read them, the paper's own code gives 0.585, beside our 0.587. We do not reproduce misreadings.
GRO_GEVAL_TAU = "paper's tau includes out-of-scale misreadings of responses that echo the input"

PAPER_CASES = [
    pytest.param(
        mode, asp, stat,
        marks=[pytest.mark.xfail(strict=True, reason=GRO_GEVAL_TAU)] if (mode, asp, stat) == ("geval", "gro", "tau") else [],
        id=f"{mode}-{asp}-{stat}",
    )
    for mode, row in bench.PAPER.items()
    for asp in row
    for stat in ("r", "tau")
]  # fmt: skip


@pytest.mark.parametrize("mode, asp, stat", PAPER_CASES)
def test_reproduces_paper_within_001(reproduction, mode, asp, stat):
    result = reproduction[(asp, mode, "integer")]  # decimals read as the paper's code reads them
    ours = result.pearson if stat == "r" else result.kendall
    paper = bench.PAPER[mode][asp][0 if stat == "r" else 1]
    assert ours == pytest.approx(paper, abs=0.01), f"{result.file}: {stat} {ours:.3f} vs paper {paper:.3f}"


@pytest.mark.parametrize("mode", list(bench.PAPER))
@pytest.mark.parametrize("asp", ["nat", "coh", "eng"])
def test_keeping_decimals_matters_only_for_groundedness(reproduction, mode, asp):
    # On the 1-3 aspects decimals are rare, so our default reading matches the paper as well.
    result = reproduction[(asp, mode, "keep")]
    paper_r, paper_tau = bench.PAPER[mode][asp]
    assert result.pearson == pytest.approx(paper_r, abs=0.01)
    assert result.kendall == pytest.approx(paper_tau, abs=0.01)


def test_keeping_decimals_changes_groundedness(reproduction):
    # gro_llm_eval_no_cot answers "0.5" in ~2% of responses: kept, tau moves by more than 0.01.
    kept = reproduction[("gro", "llm_eval_no_cot", "keep")].kendall
    integer = reproduction[("gro", "llm_eval_no_cot", "integer")].kendall
    assert abs(kept - integer) > 0.01


@pytest.mark.parametrize("row", list(bench.PAPER_TABLE2))
@pytest.mark.parametrize("asp", list(bench.ASPECTS))
def test_table2_rows_come_from_the_analyze_rate_files(reproduction, row, asp):
    mode, level = bench.TABLE2_SOURCES[row]
    result = reproduction[(asp, mode, "integer")]
    ours_r = result.pearson if level == "dataset" else result.sample_pearson
    paper_r, paper_tau = bench.PAPER_TABLE2[row][asp]
    assert ours_r == pytest.approx(paper_r, abs=0.01)
    assert result.kendall == pytest.approx(paper_tau, abs=0.01)


def test_table2_rate_explain_row_is_not_the_rate_explain_files(reproduction):
    misses = [
        asp
        for asp, (paper_r, paper_tau) in bench.PAPER_TABLE2["rate-explain"].items()
        for mode in ("rate_explain", "rate_explain_auto_cot")
        if max(abs(reproduction[(asp, mode, "integer")].pearson - paper_r),
               abs(reproduction[(asp, mode, "integer")].kendall - paper_tau)) > 0.01
    ]  # fmt: skip
    assert len(misses) == 8  # no aspect of either rate_explain file reproduces the row


FAILURE_CASES = [
    pytest.param(
        mode, asp,
        marks=[pytest.mark.xfail(strict=True, reason="2.9% of responses are prose with no rating at all")]
        if (mode, asp) == ("analyze_rate_auto_cot", "nat") else [],
        id=f"{asp}_{mode}",
    )
    for mode in bench.MODE_STYLES
    for asp in bench.ASPECTS
]  # fmt: skip


@pytest.mark.parametrize("mode, asp", FAILURE_CASES)
def test_parse_failures_under_one_percent(reproduction, mode, asp):
    result = reproduction[(asp, mode, "keep")]
    assert result.items_without_rating == 0
    assert result.failure_rate < 0.01, f"{result.file}: {result.failed} failures {result.failure_reasons}"


def test_every_released_item_is_aligned(reproduction):
    for result in reproduction.values():
        assert 353 <= result.items <= 360
        assert result.responses == 20 * result.items
