"""Bad input gets a clear error naming the field and value; the cache makes re-scoring free."""

import pytest

from judge_reward import ConfigError, Item, Judge, JudgeConfig, Reward, load_aspects
from judge_reward.aspects import Scale
from tiny_models import make_backend


def write(tmp_path, text):
    path = tmp_path / "aspects.yaml"
    path.write_text(text)
    return path


def test_builtin_aspect_files_load():
    summeval = load_aspects("summeval")
    assert set(summeval.aspects) == {"coherence", "consistency", "fluency", "relevance"}
    assert summeval.get("coherence").scale.values == (1, 2, 3, 4, 5)
    tc = load_aspects("topical_chat")
    assert tc.get("groundedness").scale.values == (0, 1) and tc.get("naturalness").scale.high == 3
    for task in ("summarization", "dialogue", "data_to_text", "translation"):
        gs = load_aspects(f"gptscore_{task}")
        assert gs.task == task and all(a.quality and a.definition for a in gs.aspects.values())
    assert len(load_aspects("gptscore_dialogue").aspects) >= 10


def test_a_directory_never_shadows_a_builtin_name(tmp_path, monkeypatch):
    # run from the data folder, "summeval" is also SummEval's directory
    monkeypatch.chdir(tmp_path)
    (tmp_path / "summeval").mkdir()
    (tmp_path / "nothing_built_in").mkdir()
    assert set(load_aspects("summeval").aspects) == {"coherence", "consistency", "fluency", "relevance"}
    assert JudgeConfig.load("default").method == "gptscore"
    with pytest.raises(ConfigError, match="a directory, not a file, 'nothing_built_in' and no built-in"):
        load_aspects("nothing_built_in")


@pytest.mark.parametrize("text, message", [
    ("aspects: [unclosed", "not valid YAML"),
    ("- a list", "expected a mapping at the top level"),
    ("aspects: {}", "non-empty mapping"),
    ("aspects: {coh: {definition: d}}", "coh.scale: required"),
    ("aspects: {coh: {definition: d, scale: {min: 5, max: 1}}}", "no candidates"),
    ("aspects: {coh: {definition: d, scale: {values: []}}}", "non-empty list"),
    ("aspects: {coh: {definition: d, scale: {min: one, max: 5}}}", "min: expected a number, got 'one'"),
    ("aspects: {coh: {definition: d, scale: {min: 1, max: 5}, colour: red}}", "unknown field"),
    ("task: poetry\naspects: {coh: {definition: d, scale: {min: 1, max: 5}}}", "task: unknown value 'poetry'"),
    ("aspects: {coh: {scale: {min: 1, max: 5}}}", "coh.definition: required"),
])
def test_malformed_aspect_yaml(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_aspects(write(tmp_path, text))


def test_user_defined_aspect(tmp_path):
    path = write(tmp_path, "task: generic\naspects:\n  politeness:\n    definition: the reply is polite.\n    scale: {values: [0, 1, 2]}\n")
    aspect = load_aspects(path).get("politeness")
    assert aspect.scale.texts == ("0", "1", "2") and aspect.criteria == "the reply is polite."


def test_unknown_aspect_and_missing_file():
    with pytest.raises(ConfigError, match="unknown aspect 'coolness'"):
        load_aspects("summeval").get("coolness")
    with pytest.raises(ConfigError, match="no file 'nope.yaml'"):
        load_aspects("nope.yaml")


def test_judge_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="method: unknown value 'magic'"):
        JudgeConfig(method="magic")
    with pytest.raises(ConfigError, match="backend.kind"):
        JudgeConfig(backend={"kind": "tpu"})
    with pytest.raises(ConfigError, match=r"gptscore: unknown field\(s\) \['directoin'\]"):
        Judge(JudgeConfig(gptscore={"directoin": "src_hypo"}), backend=make_backend("char"))
    with pytest.raises(ValueError, match=r"items\[1\].output: required"):
        Judge(JudgeConfig(), backend=make_backend("char")).score([{"output": "a"}, {"source": "b"}])


def test_scale_normalise():
    scale = Scale.from_config({"min": 1, "max": 5}, "x")
    assert scale.normalise(1) == 0 and scale.normalise(5) == 1 and scale.normalise(3) == 0.5


def test_empty_output_is_a_counted_failure_not_a_zero():
    judge = Judge(JudgeConfig(aspects=["coherence"]), backend=make_backend("char"))
    [r] = judge.score([Item("   ", "source")])
    assert r["coherence"].value is None and "empty" in r["coherence"].reason
    assert judge.stats()["failures"] == {"output: empty text cannot be judged": 1}


def test_cache_makes_rescoring_free_and_persists(tmp_path):
    db = tmp_path / "judgments.sqlite"
    backend = make_backend("char")
    judge = Judge(JudgeConfig(aspects=["fluency"], cache={"path": str(db)}), backend=backend)
    items = [Item("A summary.", "An article."), Item("Another.", "An article.")]
    first = judge.score(items)
    calls = []
    backend.continuation_logprobs = lambda reqs: calls.append(reqs) or []
    second = judge.score(items)
    assert calls == [] and [r["fluency"].value for r in second] == [r["fluency"].value for r in first]
    fresh = Judge(JudgeConfig(aspects=["fluency"], cache={"path": str(db), "memory": False}), backend=backend)
    assert [r["fluency"].value for r in fresh.score(items)] == [r["fluency"].value for r in first]
    assert fresh.cache.hits == 2


def test_replay_only_cache_answers_from_the_cache_and_counts_the_rest(tmp_path):
    """``cache.replay_only``: cached judgments come back unchanged; an item the cache lacks fails
    with reason ``not_cached`` (a counted failure, never a 0) and the backend is never asked."""
    db = tmp_path / "judgments.sqlite"
    backend = make_backend("char")
    items = [Item("A summary.", "An article."), Item("Another.", "An article.")]
    filled = Judge(JudgeConfig(aspects=["fluency"], cache={"path": str(db)}), backend=backend).score(items)
    calls = []
    backend.continuation_logprobs = lambda reqs: calls.append(reqs) or []
    replay = Judge(JudgeConfig(aspects=["fluency"], cache={"path": str(db), "replay_only": True}), backend=backend)
    got = replay.score([*items, Item("Not judged before.", "An article.")])
    assert calls == []
    assert [r["fluency"].value for r in got[:2]] == [r["fluency"].value for r in filled]
    assert got[2]["fluency"].value is None and got[2]["fluency"].reason == "not_cached"
    assert replay.stats()["failures"] == {"not_cached": 1}
    [end] = replay.sentence_end([Item("Cut off at", "An article.")])
    assert end.value is None and end.reason == "not_cached" and calls == []


def test_build_section_names_the_field_once():
    """A section's errors name the field relative to it; build_section puts the section's path in
    front exactly once, nested sections included, and a section built directly uses its own path."""
    from dataclasses import dataclass, field
    from typing import ClassVar

    from judge_reward.config import ConfigError, PositiveInt, Section, build_section

    @dataclass
    class Inner(Section):
        section_path: ClassVar[str] = "policy.inner"
        size: PositiveInt = 1

        def check(self):
            if self.size > 100:
                raise ConfigError(f"{self.size} is too large", field="size")

    @dataclass
    class Outer(Section):
        size: PositiveInt = 1
        inner: Inner = field(default_factory=Inner)

        def check(self):
            if self.size > 100:
                raise ConfigError(f"size: {self.size} is too large")

    with pytest.raises(ConfigError, match=r"^policy\.size: expected a positive integer, got 0$"):
        build_section(Outer, {"size": 0}, "policy")
    with pytest.raises(ConfigError, match=r"^policy: size: 500 is too large$"):
        build_section(Outer, {"size": 500}, "policy")
    with pytest.raises(ConfigError, match=r"^policy: unknown field\(s\) \['sise'\]"):
        build_section(Outer, {"sise": 2}, "policy")
    with pytest.raises(ConfigError, match=r"^f.yaml: policy\.inner\.size: 500 is too large$"):
        build_section(Outer, {"inner": {"size": 500}}, "policy", file="f.yaml")
    with pytest.raises(ConfigError, match=r"^policy\.inner\.size: expected a positive integer, got True$"):
        Inner(size=True)  # built directly: named by its usual path; a bool is not an integer
    with pytest.raises(ConfigError, match=r"^inner\.size: expected a positive integer, got '3'$"):
        Outer(inner={"size": "3"})


def _validated_config(judge: str, **extra) -> JudgeConfig:
    return JudgeConfig(aspects=["fluency"], reward={"aspects": ["fluency"]},
                       validated_with={"judge": judge, **extra})


def test_a_reward_validated_with_another_judge_warns_and_can_refuse():
    """Guard strengths are in the validating judge's units: another backend.model warns, names both
    models and the command; ``on_other_judge: error`` refuses; the same judge is silent."""
    import warnings

    from judge_reward.validated import OtherJudgeWarning

    backend = make_backend("char")
    with pytest.warns(OtherJudgeWarning, match=r"validated_with.judge is 'org/other-judge' but backend.model is "
                                               r"'embedded:gemma3-270m'.*judge-reward validate"):
        Reward(Judge(_validated_config("org/other-judge"), backend=backend))
    with pytest.raises(ConfigError, match=r"validated_with.judge: .*'org/other-judge'"):
        Reward(Judge(_validated_config("org/other-judge", on_other_judge="error"), backend=backend))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Reward(Judge(_validated_config("embedded:gemma3-270m"), backend=backend))
        Reward(Judge(JudgeConfig(aspects=["fluency"], reward={"aspects": ["fluency"]}), backend=backend))


def test_validated_with_is_checked_when_the_config_loads():
    with pytest.raises(ConfigError, match="validated_with.on_other_judge"):
        _validated_config("x", on_other_judge="ignore")
    with pytest.raises(ConfigError, match="validated_with"):
        JudgeConfig(validated_with={"scoreboard": "docs"})  # no judge named


def test_the_shipped_rewards_name_the_judge_they_were_validated_with():
    from judge_reward.validated import judge_model

    for name in ("default", "gptscore", "information"):
        config = JudgeConfig.load(name)
        assert config.validated_with is not None and config.validated_with.judge == judge_model(config), name
    served = JudgeConfig.load("default")
    served.backend = {"kind": "openai", "model": "org/served-judge", "base_url": "http://127.0.0.1:9/v1"}
    from judge_reward.validated import other_judge_problem

    assert "org/served-judge" in other_judge_problem(served)


def test_token_logprobs_are_typed_on_the_score_and_survive_the_cache(tmp_path):
    """GPTScore with ``unconditional`` puts the per-token log-probabilities on ``Score.tokens`` (not
    in ``details``); the cache stores and returns them unchanged; a cache written when they sat in
    ``details`` still gives them back typed."""
    import json
    import sqlite3

    from judge_reward import TokenLogprobs

    db = tmp_path / "judgments.sqlite"
    config = JudgeConfig(aspects=["fluency"], method="gptscore", cache={"path": str(db)},
                         gptscore={"unconditional": True})
    judge = Judge(config, backend=make_backend("char"))
    [r] = judge.score([Item("A summary.", "An article.")])
    tokens = r["fluency"].tokens
    assert isinstance(tokens, TokenLogprobs) and "".join(tokens.texts).strip() == "A summary."
    assert r["fluency"].value == pytest.approx(sum(tokens.with_source) / len(tokens.with_source))
    assert not {"token_logprobs", "unconditional_token_logprobs", "token_texts"} & set(r["fluency"].details)
    fresh = Judge(JudgeConfig(aspects=["fluency"], method="gptscore", gptscore={"unconditional": True},
                              cache={"path": str(db), "memory": False}), backend=make_backend("char"))
    [again] = fresh.score([Item("A summary.", "An article.")])
    assert fresh.cache.hits == 1 and again["fluency"].tokens == tokens
    # the layout before the type: the three lists inside details
    with sqlite3.connect(db) as con:
        [(key, raw)] = con.execute("SELECT key, value FROM judgments").fetchall()
        old = json.loads(raw)
        old["details"].update(token_texts=list(tokens.texts), token_logprobs=list(tokens.with_source),
                              unconditional_token_logprobs=list(tokens.without_source))
        del old["tokens"]
        con.execute("UPDATE judgments SET value = ? WHERE key = ?", (json.dumps(old), key))
    legacy = Judge(JudgeConfig(aspects=["fluency"], method="gptscore", gptscore={"unconditional": True},
                               cache={"path": str(db), "memory": False}), backend=make_backend("char"))
    [replayed] = legacy.score([Item("A summary.", "An article.")])
    assert replayed["fluency"].tokens == tokens and "token_logprobs" not in replayed["fluency"].details
    with pytest.raises(ValueError, match="2 tokens, 1 log-probabilities with the source"):
        TokenLogprobs(("a", "b"), (-1.0,), (-1.0, -2.0))
