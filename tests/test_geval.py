"""G-Eval method: probability-weighted score, health figures, failures, sampling mode, auto-CoT store."""

import math

import pytest
import yaml

from judge_reward import ConfigError, GEval, GEvalConfig, Item, Judge, JudgeConfig, load_aspects
from judge_reward.autocot import StepsStore, criteria_hash, generate_steps, parse_steps
from judge_reward.prompts.geval import build_geval_prompt
from tiny_models import make_backend

ITEMS = [
    Item("The council met on Tuesday.", "The city council met on Tuesday to discuss the budget."),
    Item("A cat sat.", "The city council met on Tuesday to discuss the budget."),
    Item("Totally unrelated text about football.", "A different article about a cat on a mat."),
]


def test_score_is_probability_weighted_sum_with_health_figures():
    backend = make_backend("char")
    aspect = load_aspects("summeval").get("coherence")
    scores = GEval().score(backend, aspect, ITEMS)
    for s in scores:
        probs = list(s.details["distribution"].values())
        assert sum(probs) == pytest.approx(1.0)
        assert s.value == pytest.approx(sum(p * v for p, v in zip(probs, range(1, 6))))
        assert 1.0 <= s.value <= 5.0
        assert 0 < s.details["mass"] <= 1.0
        assert 0 <= s.details["entropy"] <= math.log(5) + 1e-9
    assert len({round(s.value, 6) for s in scores}) == 3  # continuous scores, no ties


def test_items_sharing_a_source_are_grouped_and_unchanged_by_it():
    shared = make_backend("char", min_shared_tokens=8)
    flat = make_backend("char", prefix_sharing=False)
    aspect = load_aspects("summeval").get("fluency")
    same_source = [Item(f"Summary number {k}.", "One article for all of them.") for k in range(4)]
    a = GEval().score(shared, aspect, same_source)
    b = GEval().score(flat, aspect, same_source)
    assert [x.value for x in a] == pytest.approx([y.value for y in b], abs=1e-5)


def test_a_judge_scores_every_aspect_in_one_backend_call_with_the_same_numbers():
    """Judge.score hands all aspects to G-Eval at once: one candidate call, one shared group per
    source, and the scores equal those of each aspect scored on its own (same panel)."""
    backend = make_backend("char", min_shared_tokens=8)
    calls = []
    real = backend.candidate_logprobs
    backend.candidate_logprobs = lambda reqs: calls.append(list(reqs)) or real(reqs)
    names = ["coherence", "fluency", "relevance"]
    judge = Judge(JudgeConfig(method="geval", aspects=names, cache={"memory": False}), backend=backend)
    items = [Item(f"Summary number {k}.", "One article for all of them.") for k in range(3)]
    together = judge.score(items)
    assert len(calls) == 1 and len(calls[0]) == 9
    assert len({r.group for r in calls[0]}) == 1  # every aspect's rows share the source's prefix
    # Shared layout: the rows of one item differ only after the last form heading (the aspect's slot line).
    rows_of_first = [r.prompt for r in calls[0] if "Summary number 0." in r.prompt]
    heads = {p.rsplit("\n- ", 1)[0] for p in rows_of_first}
    assert len(rows_of_first) == 3 and len(heads) == 1
    panel = [load_aspects("summeval").get(n) for n in names]
    for name in names:
        alone = GEval(panel=panel).score(make_backend("char", prefix_sharing=False), load_aspects("summeval").get(name), items)
        assert [r[name].value for r in together] == pytest.approx([s.value for s in alone], abs=1e-5)
    # An aspect's score does not depend on which other aspects are asked for with it.
    only = judge.score(items, aspects=["fluency"])
    assert [r["fluency"].value for r in only] == pytest.approx([r["fluency"].value for r in together], abs=1e-5)


def test_min_mass_turns_a_non_judging_model_into_failures():
    backend = make_backend("char")
    aspect = load_aspects("summeval").get("coherence")
    scores = GEval(GEvalConfig(min_mass=0.999)).score(backend, aspect, ITEMS)
    assert all(s.value is None and "fell on the scale" in s.reason for s in scores)
    assert all("mass" in s.details for s in scores)


def test_sampling_mode_is_explicit_and_counts_parse_failures():
    backend = make_backend("char")
    aspect = load_aspects("summeval").get("coherence")
    scores = GEval(GEvalConfig(mode="sampling", n=4, max_new_tokens=3)).score(backend, aspect, ITEMS[:1])
    s = scores[0]
    # A random tiny model rarely writes a valid digit: whatever it writes is counted, never a silent 0.
    details = s.details
    assert len(details["responses"]) == 4
    assert details["failed"] + len(details["ratings"]) == 4
    assert (s.value is None) == (len(details["ratings"]) == 0)


def test_prompt_has_criteria_steps_texts_and_slot_with_space():
    aspect = load_aspects("summeval").get("coherence")
    p = build_geval_prompt(aspect, "The doc.", "The sum.", aspect.steps, reference="The ref.")
    assert p.text.startswith(aspect.task_introduction)
    for part in (aspect.criteria, "1. " + aspect.steps[0], "The doc.", "The ref.", "The sum."):
        assert part in p.text
    assert p.text.endswith("- Coherence: ") and p.text.startswith(p.shared) and "The sum." not in p.shared


def test_with_reference_requires_a_reference():
    backend = make_backend("char")
    aspect = load_aspects("summeval").get("coherence")
    [s] = GEval(GEvalConfig(with_reference=True)).score(backend, aspect, [Item("o", "s")])
    assert s.value is None and "reference" in s.reason


def test_parse_steps():
    text = " Read the article.\n2. Read the summary.\n3) Score it.\n\nSummary: blah"
    assert parse_steps(text) == ["Read the article.", "Read the summary.", "Score it."]
    assert parse_steps(" only one\n5. skipped numbering") == ["only one"]


def test_steps_store_refuses_stale_steps(tmp_path):
    aspects = load_aspects("summeval")
    coh = aspects.get("coherence")
    path = tmp_path / "steps.yaml"
    path.write_text(yaml.safe_dump({"model": "m", "aspects": {"coherence": {"source_hash": criteria_hash(coh), "steps": ["a", "b"]}}}))
    store = StepsStore.load(path)
    assert store.steps_for(coh) == ("a", "b")
    path.write_text(yaml.safe_dump({"model": "m", "aspects": {"coherence": {"source_hash": "stale", "steps": ["a"]}}}))
    with pytest.raises(ConfigError, match="regenerate"):
        StepsStore.load(path).steps_for(coh)
    with pytest.raises(ConfigError, match="no generated steps"):
        store.steps_for(aspects.get("fluency"))


def test_auto_steps_are_generated_once_and_reused(tmp_path):
    backend = make_backend("char")
    aspects = load_aspects("summeval").select(["coherence"])
    path = tmp_path / "steps.yaml"
    calls = []
    original = backend.generate

    def counting(requests):
        calls.append(len(requests))
        out = original(requests)
        for g in out:  # a random model writes no steps; give it a numbered continuation to store
            g.texts = [" Read it.\n2. Rate it."]
        return out

    backend.generate = counting
    store = generate_steps(backend, aspects, path)
    assert store.entries["coherence"]["steps"] == ["Read it.", "Rate it."]
    generate_steps(backend, aspects, path)  # already stored with a matching hash: no generation
    assert calls == [1, 0]
    judge = Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="geval",
                              geval={"steps": "auto", "steps_file": str(path)}), backend=backend)
    assert "2. Rate it." in build_geval_prompt(aspects[0], "s", "o", judge.method().steps_for(aspects[0])).text
    [r] = judge.score([Item("o", "s")])
    assert r["coherence"].value is not None


def test_bad_geval_config_names_the_field():
    with pytest.raises(ValueError, match="geval.mode"):
        GEvalConfig(mode="magic")
    with pytest.raises(ValueError, match="geval.steps_file"):
        GEvalConfig(steps="auto")
