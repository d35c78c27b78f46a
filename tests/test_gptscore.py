"""GPTScore against a plain per-sample reference computation, and its prompt boundary."""

import pytest
import torch

from judge_reward import GPTScore, GPTScoreConfig, Item, load_aspects
from judge_reward.prompts.gptscore import build_gptscore_prompt
from tiny_models import make_backend, save_judge_config

ITEMS = [
    Item(" The council met on Tuesday.", "The city council met on Tuesday to discuss the budget for next year.", "Council met."),
    Item("A cat sat on a mat.", "A cat sat on the mat all afternoon and would not move.", "The cat sat."),
    Item("Budget talks happened.", "The city council met on Tuesday to discuss the budget for next year.", "Talks."),
]


def reference_score(backend, context, continuation):
    """The official scorer's recipe: tokenise prompt + text, mean log-prob of the text's tokens, batch 1, full logits."""
    ids = backend.tokenizer(context + continuation)["input_ids"]
    n_ctx = len(backend.tokenizer(context)["input_ids"])
    with torch.no_grad():
        logits = backend.model(torch.tensor([ids])).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    scored = [logp[t - 1, ids[t]].item() for t in range(n_ctx, len(ids))]
    return sum(scored) / len(scored)


@pytest.mark.parametrize("style", ["char", "bpe", "bpe_bos"])
@pytest.mark.parametrize("direction", ["src_hypo", "ref_hypo", "hypo_ref", "avg_f"])
def test_gptscore_equals_reference(style, direction):
    backend = make_backend(style, min_shared_tokens=4)
    aspect = load_aspects("summeval").get("fluency")
    scores = GPTScore(GPTScoreConfig(direction=direction)).score(backend, aspect, ITEMS)
    for item, s in zip(ITEMS, scores):
        pairs = {"src_hypo": [(item.source, item.output)], "ref_hypo": [(item.reference, item.output)],
                 "hypo_ref": [(item.output, item.reference)]}
        pairs["avg_f"] = pairs["ref_hypo"] + pairs["hypo_ref"]
        expected = []
        for cond, scored in pairs[direction]:
            p = build_gptscore_prompt(aspect, cond, scored)
            expected.append(reference_score(backend, p.context, p.continuation))
        assert s.value == pytest.approx(sum(expected) / len(expected), abs=1e-4)
        assert s.details["sum_logprob"] < 0


def test_scored_tokens_are_what_the_model_writes_after_the_cue():
    backend = make_backend("bpe")
    aspect = load_aspects("summeval").get("coherence")
    p = build_gptscore_prompt(aspect, "Some article.", "The summary.")
    assert p.context.endswith("TL;DR:") and p.continuation == " The summary."
    ids, start, boundary = backend.split_tokens(p.context, p.continuation)
    assert boundary == "canonical"
    # The first scored token carries the space, as the model would write it after the cue.
    assert backend.tokenizer.convert_ids_to_tokens(ids[start:])[0].startswith("Ġ")
    assert backend.tokenizer.decode(ids[start:]) == " The summary."


def test_demonstrations_and_vanilla_change_the_prompt():
    aspect = load_aspects("summeval").get("coherence")
    with_demo = build_gptscore_prompt(aspect, "Doc.", "Sum.", demonstrations=(("Other doc.", "Other sum."),))
    assert with_demo.context.count("TL;DR:") == 2 and "Other sum." in with_demo.context
    vanilla = build_gptscore_prompt(aspect, "Doc.", "Sum.", instruction=False)
    assert "TL;DR" not in vanilla.context and vanilla.context == "Doc."


def test_long_source_is_truncated_never_the_output():
    backend = make_backend("char", max_length=400)
    aspect = load_aspects("summeval").get("coherence")
    item = Item("The short summary.", "word " * 300)
    [s] = GPTScore().score(backend, aspect, [item])
    assert s.value is not None and s.details["truncated_source_tokens"][0] > 1000
    too_long = Item("x" * 500, "doc")
    [f] = GPTScore().score(backend, aspect, [too_long])
    assert f.value is None and "never truncated" in f.reason


def test_dialogue_prompt_scores_yes():
    aspect = load_aspects("topical_chat").get("engagingness")
    p = build_gptscore_prompt(aspect, "Hi there \n Hello", "I love that band!")
    assert p.continuation == " Yes" and "engaging" in p.context and p.shared in p.context
    assert "Interesting Fact" not in p.context  # no fact given, none shown


def test_the_dialogue_question_shows_the_fact_the_reply_may_use():
    """Topical-Chat's groundedness asks about the given fact: the item's reference is shown after the
    conversation under the aspect file's label, and the score is " Yes" read after exactly that prompt."""
    aspect = load_aspects("topical_chat").get("groundedness")
    fact = "The band sold a million records in its first year."
    p = build_gptscore_prompt(aspect, "Hi there \n Hello", "I love that band!", reference=fact)
    assert f"Conversation:\nHi there \n Hello\n\nInteresting Fact: {fact}\n\nReply: I love that band!" in p.context
    assert p.shared.endswith(f"Interesting Fact: {fact}\n\nReply: ") and p.context.startswith(p.shared)
    backend = make_backend("char")
    [s] = GPTScore().score(backend, aspect, [Item("I love that band!", "Hi there \n Hello", fact)])
    assert s.value == pytest.approx(reference_score(backend, p.context, p.continuation), abs=1e-4)
    [bare] = GPTScore().score(backend, aspect, [Item("I love that band!", "Hi there \n Hello")])
    assert bare.value != pytest.approx(s.value, abs=1e-6)


def test_a_changed_dialogue_template_does_not_replay_judgments_cached_from_the_old_one(tmp_path):
    """The cache key holds the item, not the prompt: a task whose template changed adds its revision
    to the key, and a task at its first revision (summarisation) keeps the keys it always had."""
    from judge_reward import Judge, JudgeConfig
    from judge_reward.cache import judgment_key

    config = JudgeConfig.load(save_judge_config(tmp_path, "char", aspects_file="topical_chat",
                                                cache={"path": str(tmp_path / "c.sqlite")}))
    judge = Judge(config)
    item = Item("I love that band!", "Hi there \n Hello", "The band sold a million records.")
    aspect = judge.aspect_set.get("groundedness")
    [got] = judge.score([item], ["groundedness"])
    method = judge.method("gptscore")
    assert method.prompt_revision(aspect) == "/prompt2"
    assert method.prompt_revision(load_aspects("summeval").get("coherence")) == ""
    fp, model = method.fingerprint(), judge.backend.model_id
    assert judge.cache.get(judgment_key(model, fp, aspect.content_hash() + "/prompt2", item)) is not None
    assert judge.cache.get(judgment_key(model, fp, aspect.content_hash(), item)) is None
    assert got["groundedness"].value is not None


def test_reference_directions_need_a_reference():
    backend = make_backend("char")
    aspect = load_aspects("summeval").get("coherence")
    [s] = GPTScore(GPTScoreConfig(direction="ref_hypo")).score(backend, aspect, [Item("out", "src")])
    assert s.value is None and "reference" in s.reason


def test_source_first_layout_shares_the_source_across_aspects_in_one_call():
    """``layout: source_first`` puts the aspect's instruction after the source, so all aspects of an
    item fall in one prefix group; a judge sends them in one backend call, and each score is the
    plain reference computation of its own prompt."""
    from judge_reward import Judge, JudgeConfig

    aspects = load_aspects("summeval")
    p = build_gptscore_prompt(aspects.get("coherence"), "Doc.", "Sum.", layout="source_first")
    q = build_gptscore_prompt(aspects.get("fluency"), "Doc.", "Sum.", layout="source_first")
    assert p.context.startswith("Doc.") and p.context.endswith("TL;DR:") and "coherent" in p.context
    assert p.shared == q.shared == "Doc." and p.context != q.context
    backend = make_backend("char", min_shared_tokens=4)
    calls = []
    real = backend.continuation_logprobs
    backend.continuation_logprobs = lambda reqs: calls.append(list(reqs)) or real(reqs)
    judge = Judge(JudgeConfig(aspects=["coherence", "fluency"], gptscore={"layout": "source_first"},
                              cache={"memory": False}), backend=backend)
    scores = judge.score(ITEMS)
    assert len(calls) == 1 and len(calls[0]) == 2 * len(ITEMS)
    assert len({r.group for r in calls[0]}) == len({it.source for it in ITEMS})
    for item, got in zip(ITEMS, scores):
        for name in ("coherence", "fluency"):
            prompt = build_gptscore_prompt(aspects.get(name), item.source, item.output, layout="source_first")
            assert got[name].value == pytest.approx(reference_score(backend, prompt.context, prompt.continuation), abs=1e-4)
