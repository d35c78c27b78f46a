"""The reward's main term (``reward.term``): the judge's score or the information the output gives
about its source, logged under its own name; the old spelling of the information term
(``guards.copy_credit.contrast``) still gives the same reward, with a warning."""

from __future__ import annotations

import json
import warnings

import pytest
from tiny_models import make_backend

from judge_reward import ConfigError, Item, Judge, JudgeConfig
from judge_reward.guards import SourceStats, copied_token_mask, copy_credit
from judge_reward.reward import Reward, RewardConfig, check_reward
from judge_reward.terms import InformationTerm

ARTICLE = ("The city council voted on Tuesday to close the old river bridge for repairs after engineers found "
           "cracks in two of its steel supports. The bridge carries about twelve thousand cars a day, and the "
           "council said traffic would be sent through the northern ring road while the work goes on. Repairs "
           "are expected to take four months and cost nine million pounds, paid from the transport budget.")
SUMMARY = "Engineers found cracked supports, so the council shut the river bridge for four months of repairs."
LEAD = " ".join(ARTICLE.split()[:14])
TEXTS = [SUMMARY, f"{SUMMARY} {LEAD}", LEAD, "bridge council repairs cracks"]
UNCONDITIONAL = {"reduce": "mean", "unconditional": True}
FLOOR = {"enabled": True, "floor": -3.0, "weight": 2.0, "unconditional": True, "uncopied_only": True, "budget_tokens": 12}


def tiny_judge(reward=None, method="gptscore", **config):
    config.setdefault("gptscore", UNCONDITIONAL)
    cfg = JudgeConfig(aspects_file="summeval", aspects=["coherence", "fluency"], method=method,
                      reward=reward or {}, **config)
    return Judge(cfg, backend=make_backend("char"))


def information_by_hand(result, text: str, budget: int | None, min_fragment: int = 4, near_copy_words: int = 0) -> float:
    """The information term from the judge's TokenLogprobs: per aspect, the sum over the first
    ``budget`` tokens of (with source - without), copied tokens 0, divided by the budget; then the
    aspects' (equal-weight) mean."""
    per_aspect = []
    for score in result.scores.values():
        t = score.tokens
        copied = copied_token_mask(t.texts, " " + text, SourceStats(ARTICLE), min_fragment, near_copy_words)
        b = budget or len(t.texts)
        gains = [0.0 if c else w - wo for w, wo, c in zip(t.with_source, t.without_source, copied)]
        per_aspect.append(sum(gains[:b]) / b)
    return sum(per_aspect) / len(per_aspect)


def charges(result) -> float:
    return sum(v for k, v in result.components.items() if k.startswith("guard/"))


def test_the_information_term_is_what_reading_the_source_adds_to_the_outputs_own_tokens():
    reward = Reward(tiny_judge({"normalise": "none", "term": "information", "information": {"budget_tokens": 12},
                                "guards": {"likelihood_floor": FLOOR}}))
    results = reward([Item(t, ARTICLE) for t in TEXTS])
    for text, r in zip(TEXTS, results):
        expected = information_by_hand(r, text, 12)
        assert r.components["term/information"] == pytest.approx(expected, abs=1e-9)
        assert r.value == pytest.approx(expected - charges(r), abs=1e-9)
        # the judge's score is reported beside the term, not added to it
        judge = sum(s.value for s in r.scores.values()) / 2
        assert r.term["name"] == "information" and r.term["judge"] == pytest.approx(judge, abs=1e-9)
        assert list(r.components) == ["aspect/coherence", "aspect/fluency", "term/information", "guard/likelihood_floor"]
        assert "guard/copy_credit" not in r.components
    summary, padded, lead, _ = results
    # the pasted lead's tokens (all but the leading space) earn nothing: without the copy mask they would
    assert lead.term["copied_token_share"] > 0.9
    assert summary.term["copied_token_share"] == 0.0 < padded.term["copied_token_share"]
    unmasked = Reward(tiny_judge({"normalise": "none", "term": "information",
                                  "information": {"budget_tokens": 12, "min_fragment": 100}}))([Item(LEAD, ARTICLE)])[0]
    assert unmasked.term["copied_token_share"] == 0.0
    assert abs(unmasked.components["term/information"] - lead.components["term/information"]) > 1e-3
    # near copies: a different mask, so a different number
    near = Reward(tiny_judge({"normalise": "none", "term": "information",
                              "information": {"budget_tokens": None, "near_copy_words": 3}}))([Item(TEXTS[3], ARTICLE)])[0]
    assert near.components["term/information"] == pytest.approx(information_by_hand(near, TEXTS[3], None, 4, 3), abs=1e-9)


def test_the_judge_term_is_the_weighted_judge_score_and_the_default():
    guards = {"repetition": {"enabled": True}, "length": {"enabled": True, "min_words": 8}}
    reward = Reward(tiny_judge({"normalise": "none", "weights": {"coherence": 3, "fluency": 1}, "guards": guards}))
    assert reward.config.term == "judge" and reward.describe()["term"] == "judge"
    for r in reward([Item(SUMMARY, ARTICLE), Item("bridge bridge bridge", ARTICLE)]):
        judge = 0.75 * r.components["aspect/coherence"] + 0.25 * r.components["aspect/fluency"]
        assert r.components["term/judge"] == r.term["value"] == pytest.approx(judge, abs=1e-12)
        assert r.value == pytest.approx(judge - charges(r), abs=1e-12)
    # the shipped default starts from the judge's score; information from the information term
    assert RewardConfig.from_dict(JudgeConfig.from_yaml("default").reward).term == "judge"
    assert RewardConfig.from_dict(JudgeConfig.from_yaml("information").reward).term == "information"


def old_spelling(budget: int | None = 12, **copy_credit_fields) -> dict:
    credit = {"enabled": True, "weight": 1.0, "contrast": True, "budget_tokens": budget, **copy_credit_fields}
    return {"normalise": "none", "guards": {"copy_credit": credit, "likelihood_floor": FLOOR}}


@pytest.mark.parametrize("budget", [12, None])
def test_an_old_contrast_config_warns_and_gives_the_same_reward(budget):
    """``copy_credit: {contrast: true}`` was the information term as a penalty: judge - (judge -
    information). It loads as the term with a one-line FutureWarning naming the new spelling, and its
    rewards are the old formula's, spelt out here with copy_credit()'s contrast form."""
    with pytest.warns(FutureWarning, match=r"copy_credit\.contrast is deprecated: write `term: information` and "
                                           rf"`information: \{{min_fragment: 4, near_copy_words: 8, budget_tokens: "
                                           rf"{'null' if budget is None else budget}, grounded_only: false\}}`"):
        old = Reward(tiny_judge(old_spelling(budget, near_copy_words=8)))
    assert old.config.term == "information" and not old.guards.copy_credit.enabled
    assert old.config.information == InformationTerm(min_fragment=4, near_copy_words=8, budget_tokens=budget)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling does not warn
        new = Reward(tiny_judge({"normalise": "none", "term": "information",
                                 "information": {"near_copy_words": 8, "budget_tokens": budget},
                                 "guards": {"likelihood_floor": FLOOR}}))
    items = [Item(t, ARTICLE) for t in TEXTS]
    for text, o, n in zip(TEXTS, old(items), new(items)):
        # the old reward, as the old code computed it: each aspect's score minus copy credit with contrast
        source = SourceStats(ARTICLE)
        old_style = 0.0
        for score in n.scores.values():
            t = score.tokens
            mask = copied_token_mask(t.texts, " " + text, source, 4, 8)
            old_style += (score.value - copy_credit(t.with_source, t.without_source, mask, True, budget)) / 2
        old_style -= charges(n)
        assert n.value == pytest.approx(old_style, abs=1e-6)
        assert o.value == n.value and o.components == n.components


def test_an_old_contrast_config_that_cannot_be_the_term_is_refused():
    with pytest.raises(ConfigError, match=r"reward\.guards\.copy_credit\.weight: contrast: true with a weight other "
                                          r"than 1 \(got 0\.5\) mixes the judge's score with the information"):
        RewardConfig.from_dict(old_spelling(weight=0.5))
    with pytest.raises(ConfigError, match=r"reward\.guards\.copy_credit\.contrast: contrast: true makes the reward "
                                          r"the information, and term is already 'information'"):
        RewardConfig.from_dict({**old_spelling(), "term": "information"})
    # copy_credit without contrast stays a guard: a charge for what copied words gained from the source
    config = RewardConfig.from_dict({"normalise": "none", "guards": {"copy_credit": {"enabled": True}}})
    assert config.term == "judge" and config.guards.copy_credit.enabled


def test_the_information_term_refuses_a_judge_that_cannot_give_it():
    term = {"normalise": "none", "term": "information"}
    with pytest.raises(ConfigError, match=r"reward\.term: 'information' reads the judge's token log-probabilities "
                                          r"and needs method 'gptscore', got method 'geval'"):
        Reward(tiny_judge(term, method="geval"))
    with pytest.raises(ConfigError, match=r"reward\.term: 'information' needs gptscore\.unconditional: true in the "
                                          r"judge config .*, got false"):
        Reward(tiny_judge(term, gptscore={"reduce": "mean"}))
    with pytest.raises(ConfigError, match=r"reward\.term: unknown value 'informaton'; choose one of \('judge', 'information'\)"):
        RewardConfig.from_dict({"term": "informaton"})
    with pytest.raises(ConfigError, match=r"reward\.information: the information term's settings, but term is 'judge'"):
        RewardConfig.from_dict({"information": {"budget_tokens": 32}})
    with pytest.raises(ConfigError, match=r"reward\.information\.budget_tokens: expected a positive integer, got 0"):
        RewardConfig.from_dict({"term": "information", "information": {"budget_tokens": 0}})
    with pytest.raises(ConfigError, match=r"reward\.information: unknown field\(s\) \['budget'\]"):
        RewardConfig.from_dict({"term": "information", "information": {"budget": 32}})
    # the config-level check names the file, before any model loads
    config = JudgeConfig(aspects_file="summeval", method="geval", reward=term)
    config.source_file = "mine.yaml"  # as JudgeConfig.load sets it
    with pytest.raises(ConfigError, match=r"^mine\.yaml: reward\.term: 'information' reads"):
        check_reward(config)


def test_the_information_term_needs_the_items_source_and_its_token_logprobs():
    reward = Reward(tiny_judge({"normalise": "none", "term": "information"}))
    [sourceless, ok] = reward([Item(SUMMARY, ""), Item(SUMMARY, ARTICLE)])
    assert sourceless.value is None and "the item has no source" in sourceless.reason
    assert ok.value is not None
    assert reward.config.source_readers() == ["term information"]
    # combine() alone has no texts to read the term from: an error, never the judge's score in its place
    with pytest.raises(ValueError, match="reward.term 'information' is read from the item's texts"):
        reward.combine(ok.scores)
    # scores without token log-probabilities are an error, never a 0
    judge = tiny_judge({"normalise": "none", "term": "information"})
    plain = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence", "fluency"], gptscore={"reduce": "mean"}),
                  backend=judge.backend)
    batch = Reward(judge).plan([Item(SUMMARY, ARTICLE)])
    with pytest.raises(RuntimeError, match="term information need the judge's token log-probabilities"):
        batch.finish(plain.score(batch.to_judge))


def test_trainers_log_the_term_and_refuse_to_split_it_by_aspect():
    from judge_reward.trainers.reward import JudgeReward, JudgeRewardConfig

    judge = tiny_judge({"normalise": "none", "term": "information", "information": {"budget_tokens": 12}})
    fn = JudgeReward(judge)
    logged = {}
    [value] = fn(prompts=["Summarise."], completions=[SUMMARY], source=[ARTICLE],
                 log_metric=lambda k, v: logged.__setitem__(k, v))
    assert logged["judge/term/information"] == pytest.approx(value, abs=1e-12)  # no guard: the reward is its term
    assert "judge/coherence/mean" in logged  # the judge's own scores beside it
    with pytest.raises(ValueError, match=r"reward: term information compare the completion with its source"):
        fn(prompts=["Summarise."], completions=[SUMMARY])
    with pytest.raises(ConfigError, match=r"reward\.term: per-aspect rewards split the judge's score"):
        JudgeReward.per_aspect(judge)
    assert JudgeRewardConfig.from_judge(judge).reward_config().term == "information"


def test_the_cli_writes_the_term(tmp_path):
    from typer.testing import CliRunner

    from judge_reward.cli import app
    from tiny_models import save_judge_config

    config = save_judge_config(tmp_path, reward={"normalise": "none", "term": "information"}, gptscore=UNCONDITIONAL)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"output": SUMMARY, "source": ARTICLE}) + "\n")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["score", str(src), "-o", str(out), "--config", str(config)])
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    assert record["reward_term"]["name"] == "information"
    assert record["reward_components"]["term/information"] == pytest.approx(record["reward"], abs=1e-12)
