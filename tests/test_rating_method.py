"""RatingMethod arithmetic and prompt building.

The stand-in backend below returns canned generations: it tests the method's bookkeeping (one
request per item, mean of what parses, failures counted, scale mapping), not a model. The
real-model test of this method is the lead's.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from judge_reward.aspects import load_aspects
from judge_reward.backends.base import Generations
from judge_reward.methods.base import Item
from judge_reward.methods.rating import RatingConfig, RatingMethod, map_linear
from judge_reward.prompts.rating import STYLES, aspect_adjective, build_rating_prompt, rating_scale


class CannedBackend:
    """Answers every generation request with the next canned ``Generations``; records requests."""

    model_id = "canned"
    max_context_tokens = None

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []

    def generate(self, requests):
        self.calls.append(list(requests))
        return [self.answers.pop(0) for _ in requests]

    def count_tokens(self, text):
        return None

    def truncate_tokens(self, text, max_tokens):
        return text

    def candidate_logprobs(self, requests):
        raise AssertionError("the rating method must only generate")

    continuation_logprobs = candidate_logprobs


@pytest.fixture(scope="module")
def topical():
    return load_aspects("topical_chat")


@pytest.fixture(scope="module")
def coherence(topical):
    return topical.get("coherence")  # 1-3


ITEMS = [
    Item("i love jazz . do you ?", "a: hi\nb: do you like music?", "Jazz was born in New Orleans.", "a"),
    Item("the weather is nice", "a: seen any good films?", "Casablanca premiered in 1942.", "b"),
]


def texts(*t):
    return Generations(list(t))


# --- the method's arithmetic ------------------------------------------------------------------


def test_score_is_mean_of_parsed_ratings_and_failures_are_counted(coherence):
    answers = [
        texts("Rating: 3\nRationale: follows on.", "Rating: 2\nRationale: loosely.", "I cannot tell.", "Rating: 7"),
        texts("Rating: 1\nRationale: ignores 2 turns.", "Rating: 1"),
    ]
    backend = CannedBackend(answers)
    config = RatingConfig(style="rate_explain", n=4, temperature=0.7, max_new_tokens=64, seed=11)
    scores = RatingMethod(config).score(backend, coherence, ITEMS)

    assert len(backend.calls) == 1 and len(backend.calls[0]) == 2  # one call, one request per item
    for request, item in zip(backend.calls[0], ITEMS):
        assert (request.n, request.temperature, request.max_new_tokens, request.seed) == (4, 0.7, 64, 11)
        assert item.output in request.prompt

    first, second = scores
    assert first.value == pytest.approx(2.5)
    assert first.details["ratings"] == [3, 2]
    assert first.details["parsed"] == 2 and first.details["failed"] == 2
    assert first.details["failure_reasons"] == {"no rating found": 1, "out of scale: 7 not in 1-3": 1}
    assert first.details["responses"] == answers[0].texts
    assert "scale_mapping" not in first.details
    assert second.value == pytest.approx(1.0) and second.details["failed"] == 0


def test_no_parsable_sample_is_a_failure_not_a_zero(coherence):
    backend = CannedBackend([texts("Good", "Yes", ""), texts("2")])
    first, second = RatingMethod(RatingConfig(n=3)).score(backend, coherence, ITEMS)
    assert first.value is None
    assert first.reason == "no parsable rating in 3 samples"
    assert first.details["failure_reasons"] == {"no rating found": 2, "empty response": 1}
    assert second.value == 2


def test_backend_error_becomes_that_items_failure(coherence):
    backend = CannedBackend([Generations(None, error="server returned 500"), texts("Rating: 3")])
    first, second = RatingMethod().score(backend, coherence, ITEMS)
    assert first.value is None and first.reason == "server returned 500"
    assert second.value == 3


@pytest.mark.parametrize(
    "style, answers, aspect_name, expected, mapping",
    [
        ("stars", ["★★★★★", "3 stars"], "coherence", 2.5, "linear: 1-5 -> 1-3"),  # mean 4 of 1-5 -> 2.5 of 1-3
        ("direct_assessment", ["100", "Score: 50"], "coherence", 2.5, "linear: 0-100 -> 1-3"),  # 75 -> 2.5
        ("direct_assessment", ["20", "60"], "groundedness", 0.4, "linear: 0-100 -> 0-1"),
    ],
)
def test_own_scale_styles_map_linearly_onto_the_aspect(topical, style, answers, aspect_name, expected, mapping):
    backend = CannedBackend([texts(*answers)])
    (score,) = RatingMethod(RatingConfig(style=style, n=2)).score(backend, topical.get(aspect_name), ITEMS[:1])
    assert score.value == pytest.approx(expected)
    assert score.details["scale_mapping"] == mapping
    assert score.details["rating_scale"] == list(rating_scale(style, topical.get(aspect_name)))
    assert len(score.details["ratings"]) == 2  # ratings stay on the judge's own scale


def test_own_scale_styles_reject_values_outside_their_scale(coherence):
    backend = CannedBackend([texts("150", "40")])
    (score,) = RatingMethod(RatingConfig(style="direct_assessment", n=2)).score(backend, coherence, ITEMS[:1])
    assert score.details["failure_reasons"] == {"out of scale: 150 not in 0-100": 1}
    assert score.value == pytest.approx(map_linear(40, (0, 100), (1, 3)))


def test_items_that_cannot_be_judged_fail_alone(coherence):
    items = [Item("a reply", "history", None, "no-ref"), ITEMS[0], Item("   ", "history", "fact", "empty")]
    backend = CannedBackend([texts("Rating: 2")])
    scores = RatingMethod(RatingConfig(with_reference=True, n=1)).score(backend, coherence, items)
    assert len(backend.calls[0]) == 1  # only the judgeable item is sent
    assert scores[0].value is None and "no reference" in scores[0].reason and "no-ref" in scores[0].reason
    assert scores[1].value == 2
    assert scores[2].value is None and "empty" in scores[2].reason
    assert "Interesting Fact:\nJazz was born in New Orleans." in backend.calls[0][0].prompt


def test_default_max_new_tokens_follow_the_style(coherence):
    for style, minimum in (("score_only", 1), ("analyze_rate", 200)):
        backend = CannedBackend([texts("2")])
        RatingMethod(RatingConfig(style=style, n=1)).score(backend, coherence, ITEMS[:1])
        assert backend.calls[0][0].max_new_tokens >= minimum
    assert RatingConfig(style="analyze_rate").new_tokens > RatingConfig(style="score_only").new_tokens


def test_config_validation():
    with pytest.raises(ValueError, match="rating.style"):
        RatingConfig(style="likert")
    with pytest.raises(ValueError, match="rating.n"):
        RatingConfig(n=0)
    with pytest.raises(ValueError, match="rating.temperature"):
        RatingConfig(temperature=-1)
    with pytest.raises(ValueError, match="rating.max_new_tokens"):
        RatingConfig(max_new_tokens=0)
    with pytest.raises(ValueError, match="takes no evaluation steps"):
        RatingConfig(style="stars", use_aspect_steps=True)


def test_aspect_steps_must_exist_when_asked_for(coherence):
    with pytest.raises(ValueError, match="has no steps"):
        RatingMethod(RatingConfig(use_aspect_steps=True)).score(CannedBackend([]), coherence, ITEMS)
    with_steps = replace(coherence, steps=("Read the history.", "Check the reply follows on."))
    backend = CannedBackend([texts("Rating: 3")])
    RatingMethod(RatingConfig(use_aspect_steps=True, n=1)).score(backend, with_steps, ITEMS[:1])
    assert "1. Read the history.\n2. Check the reply follows on." in backend.calls[0][0].prompt


def test_fingerprint_tracks_the_configuration():
    base = RatingMethod(RatingConfig())
    assert base.fingerprint() == RatingMethod(RatingConfig()).fingerprint()
    for changed in (RatingConfig(style="stars"), RatingConfig(n=5), RatingConfig(with_reference=True), RatingConfig(seed=1)):
        assert RatingMethod(changed).fingerprint() != base.fingerprint()


# --- prompts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_every_style_shows_the_texts_and_the_reference_only_when_asked(coherence, style):
    item = ITEMS[0]
    without = build_rating_prompt(style, coherence, item)
    with_ref = build_rating_prompt(style, coherence, item, with_reference=True)
    for prompt in (without, with_ref):
        assert item.output in prompt and item.source in prompt
        assert prompt.index(item.source) < prompt.index(item.output)
    assert item.reference not in without and "Interesting Fact:" not in without
    assert f"{coherence.reference_label}:\n{item.reference}" in with_ref


def test_style_specific_instructions(coherence, topical):
    item = ITEMS[0]
    assert build_rating_prompt("score_only", coherence, item).endswith("- Coherence: ")
    assert "How coherent is the response?" in build_rating_prompt("free_text", coherence, item)
    assert "a whole number from 1 to 3" in build_rating_prompt("free_text", coherence, item)
    assert "from 0 to 1" in build_rating_prompt("free_text", topical.get("groundedness"), item)
    rate_explain = build_rating_prompt("rate_explain", coherence, item)
    assert rate_explain.index('"Rating:"') < rate_explain.index('"Rationale:"')
    analyze = build_rating_prompt("analyze_rate", coherence, item)
    assert analyze.index('"Analysis:"') < analyze.index('"Rating:"')
    assert "0 to 100" in build_rating_prompt("direct_assessment", coherence, item)
    assert "five stars" in build_rating_prompt("stars", coherence, item)
    for style in STYLES:
        prompt = build_rating_prompt(style, coherence, item)
        assert coherence.criteria in prompt or coherence.definition in prompt


def test_steps_are_listed_for_form_styles_only(coherence):
    steps = ["Read the history.", "Judge the reply."]
    prompt = build_rating_prompt("score_only", coherence, ITEMS[0], steps=steps)
    assert "1. Read the history.\n2. Judge the reply." in prompt
    assert prompt.index("Judge the reply.") < prompt.index(ITEMS[0].output)
    assert "steps" not in build_rating_prompt("score_only", coherence, ITEMS[0]).lower()
    with pytest.raises(ValueError, match="takes no evaluation steps"):
        build_rating_prompt("stars", coherence, ITEMS[0], steps=steps)


def test_prompt_errors(coherence):
    with pytest.raises(ValueError, match="style='likert'"):
        build_rating_prompt("likert", coherence, ITEMS[0])
    with pytest.raises(ValueError, match="no reference"):
        build_rating_prompt("rate_explain", coherence, Item("reply", "history"), with_reference=True)


@pytest.mark.parametrize(
    "name, adjective",
    [("coherence", "coherent"), ("relevance", "relevant"), ("fluency", "fluent"), ("naturalness", "natural"),
     ("consistency", "consistent"), ("engagingness", "engaging"), ("overall", "good in overall")],
)  # fmt: skip
def test_aspect_adjective(name, adjective):
    assert aspect_adjective(name) == adjective


def test_templates_share_no_wording_with_the_released_prompts(shared_data, topical):
    # The paper's prompts (the data files' "prompt" field) minus the item texts, as 8-word runs.
    def runs(text, k=8):
        words = re.findall(r"[a-z0-9]+", text.lower())
        return {" ".join(words[i : i + k]) for i in range(len(words) - k + 1)}

    theirs = set()
    for path in sorted((shared_data / "closer_look_topical_chat").glob("*.json")):
        record = json.loads(path.read_text())[0]
        prompt = record["prompt"]
        for key in ("source", "context", "system_output"):
            prompt = prompt.replace(record[key], " ")
        theirs |= runs(prompt)
    placeholder = Item("OUTPUT", "SOURCE", "REFERENCE")
    for aspect in topical.aspects.values():
        for style in STYLES:
            steps = ["Read the history.", "Rate the reply."] if style in ("score_only", "analyze_rate") else None
            ours = runs(build_rating_prompt(style, aspect, placeholder, steps=steps, with_reference=True))
            assert not ours & theirs, (aspect.name, style, ours & theirs)
