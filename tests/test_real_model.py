"""Integration tests with the real embedded judge (Gemma 3 270M). Marked slow: one load per session."""

import json
import random
import subprocess
import sys

import pytest

from judge_reward import GEval, GPTScore, Item, load_aspects
from judge_reward.backends.base import CandidateRequest
from judge_reward.prompts.geval import build_geval_prompt

pytestmark = pytest.mark.slow


def damaged(text: str, seed: int) -> str:
    words = text.split()
    random.Random(seed).shuffle(words)
    return " ".join(words)


@pytest.fixture(scope="module")
def summeval_docs(shared_data):
    rows = json.loads((shared_data / "summeval" / "summeval.json").read_text())
    return rows[:160]


@pytest.fixture(scope="module")
def summeval_sample(sample_data):
    """The first SummEval records (the same as summeval_docs starts with), from the test fixtures."""
    return json.loads((sample_data / "summeval" / "summeval.json").read_text())


def test_bos_once_and_gemma_digit_tokens(gemma_backend):
    tok = gemma_backend.tokenizer
    ids = gemma_backend.encode("Hello")
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
    assert len(tok(" 1", add_special_tokens=False)["input_ids"]) == 2  # the accident the candidates module handles
    [res] = gemma_backend.candidate_logprobs([CandidateRequest("- Coherence: ", ("1", "2", "3", "4", "5"))])
    assert res.details["candidate_tokens"] == [1, 1, 1, 1, 1]  # the slot's space is in the shared prefix


def test_gemma_tokenizer_keeps_words_whole(gemma_backend):
    """The converted copy's tokenizer reads words as Gemma's vocabulary holds them (transformers before
    5.18 rebuilt it from GGUF splitting them, "Paul" -> "Pa", "ul", or into single characters)."""
    from judge_reward.backends.loading import tokenizer_problem

    tok = gemma_backend.tokenizer
    assert tokenizer_problem(tok) is None
    assert tok.tokenize("Paul Merson has restarted his row") == ["Paul", "\u2581M", "erson", "\u2581has", "\u2581restarted", "\u2581his", "\u2581row"]


def test_gptscore_separates_good_from_damaged_summaries(gemma_backend, summeval_docs):
    aspect = load_aspects("summeval").get("fluency")
    best = sorted(summeval_docs, key=lambda r: -r["scores"]["fluency"])[:10]
    items = [Item(r["system_output"], r["source"]) for r in best]
    items += [Item(damaged(r["system_output"], k), r["source"]) for k, r in enumerate(best)]
    scores = [s.value for s in GPTScore().score(gemma_backend, aspect, items)]
    wins = sum(good > bad for good, bad in zip(scores[:10], scores[10:]))
    assert wins == 10, scores


def test_geval_on_real_model_is_a_valid_distribution_and_the_slot_space_matters(gemma_backend, summeval_sample):
    aspect = load_aspects("summeval").get("coherence")
    items = [Item(r["system_output"], r["source"]) for r in summeval_sample[:4]]
    scores = GEval().score(gemma_backend, aspect, items)
    for s in scores:
        assert 1.0 <= s.value <= 5.0
        assert sum(s.details["distribution"].values()) == pytest.approx(1.0)
        assert s.details["mass"] > 0.5
    prompt = build_geval_prompt(aspect, items[0].source, items[0].output, aspect.steps).text
    [no_space] = gemma_backend.candidate_logprobs([CandidateRequest(prompt.rstrip(), aspect.scale.texts)])
    import math
    assert sum(math.exp(x) for x in no_space.logprobs) < 0.05 < scores[0].details["mass"]


def test_cli_score_end_to_end(tmp_path, summeval_sample):
    src = tmp_path / "in.jsonl"
    with src.open("w") as fh:
        for r in summeval_sample[:3]:
            # sources cut to 120 words: what is tested is the command's path, not the judge on long articles
            source = " ".join(r["source"].split()[:120])
            fh.write(json.dumps({"id": r["system_id"], "source": source, "output": r["system_output"]}) + "\n")
    fh = tmp_path / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "judge_reward.cli", "score", str(src), "-o", str(fh), "--aspects", "coherence,fluency",
         "--method", "gptscore,geval"],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = [json.loads(line) for line in fh.read_text().splitlines()]
    assert [o["id"] for o in out] == [r["system_id"] for r in summeval_sample[:3]]
    for o in out:
        assert set(o["scores"]) == {"gptscore/coherence", "gptscore/fluency", "geval/coherence", "geval/fluency"}
        assert o["scores"]["gptscore/coherence"] < 0 and 1 <= o["scores"]["geval/fluency"] <= 5
        assert "mass" in o["details"]["geval/coherence"]
    assert "failures" in proc.stderr and "items/s" in proc.stderr


def test_geval_prompts_tokenise_once_with_the_same_ids(gemma_backend, summeval_sample):
    """With Gemma's tokenizer, every G-Eval prompt (both layouts, all four aspects) takes the
    last-line path and gets exactly the ids of tokenising each whole prompt + value."""
    from judge_reward.candidates import tokenize_candidates
    from judge_reward.prompts.geval import build_geval_prompt

    aspects = load_aspects("summeval")
    checked = 0
    for layout in ("shared", "guarded"):
        for name in ("coherence", "consistency", "fluency", "relevance"):
            aspect = aspects.get(name)
            for r in summeval_sample[:3]:
                prompt = build_geval_prompt(aspect, r["source"], r["system_output"], aspect.steps, layout=layout).text
                calls = []

                def encode(text):
                    calls.append(text)
                    return gemma_backend.encode(text)

                quick = tokenize_candidates(encode, prompt, aspect.scale.texts, gemma_backend._tokenize_many)
                assert len(calls) == 1, (layout, name)
                assert quick == tokenize_candidates(gemma_backend.encode, prompt, aspect.scale.texts)
                checked += 1
    assert checked == 24


def test_geval_prompts_of_an_item_share_the_tokens_of_their_head(gemma_backend, summeval_sample):
    """The four aspects' G-Eval prompts of an item, each tokenised twice as scoring does (fit, then
    score): the backend's ids are exactly Gemma's whole-text ids, and in the shared layout (the four
    prompts differ only in the form line) one whole tokenisation serves the item."""
    from judge_reward.prompts.geval import build_geval_prompt

    aspects = [load_aspects("summeval").get(n) for n in ("coherence", "consistency", "fluency", "relevance")]
    tok = gemma_backend.tokenizer
    whole, real = [], gemma_backend._tokenize
    gemma_backend.clear_token_memo()
    gemma_backend._tokenize = lambda text: (whole.append(text) if len(text) > 200 else None) or real(text)
    try:
        for layout in ("shared", "guarded"):
            for r in summeval_sample[:3]:
                whole.clear()
                for _ in range(2):
                    for aspect in aspects:
                        prompt = build_geval_prompt(aspect, r["source"], r["system_output"], aspect.steps,
                                                    layout=layout, panel=[(a, a.steps) for a in aspects]).text
                        assert gemma_backend.count_tokens(prompt) == len(tok(prompt, add_special_tokens=False)["input_ids"])
                        assert gemma_backend.encode(prompt) == tok(prompt, add_special_tokens=True)["input_ids"]
                assert len(whole) == (1 if layout == "shared" else 4), layout  # guarded: a head per aspect
    finally:
        del gemma_backend._tokenize
        gemma_backend.clear_token_memo()


# The `information` config's rewards at commit 25c9191, before reward.term (the information spelt as
# guards.copy_credit with contrast), with this judge in fp32 on CPU, for the items below.
INFORMATION_BEFORE_TERM = [-0.9441825334842386, 0.0, 0.32211577892303467, 0.7396722871065138, 0.09430002421140693,
                           -1.0, -4.624350039397971]


def test_the_information_term_gives_the_rewards_of_its_old_spelling(shared_data):
    """``information`` (reward.term: information) with the embedded judge in fp32: the same rewards as
    the same reward spelt the old way (guards.copy_credit with contrast) and as the old code gave, on
    five SummEval summaries, a copied lead and a list of the source's names."""
    from judge_reward import Judge, JudgeConfig
    from judge_reward.config import read_mapping, resolve_config_path
    from judge_reward.reward import Reward, RewardConfig

    raw = read_mapping(resolve_config_path("information", "judges"))
    raw["backend"].update(dtype="float32", device="cpu", progress=False)
    rows = json.loads((shared_data / "summeval" / "summeval.json").read_text())
    picked = [rows[k] for k in (0, 1, 17, 40, 333)]
    items = [Item(r["system_output"], r["source"]) for r in picked]
    source = picked[0]["source"]
    items.append(Item(" ".join(source.split()[:60]), source))
    names = sorted({w.strip(".,;:'\"()") for w in source.split() if w[:1].isupper()})[:15]
    items.append(Item(", ".join(names), source))
    judge = Judge(JudgeConfig.load(raw))
    old = {k: v for k, v in raw["reward"].items() if k not in ("term", "information")}
    old["guards"] = {**old["guards"], "copy_credit": {"enabled": True, "weight": 1.0, "contrast": True, **raw["reward"]["information"]}}
    with pytest.warns(FutureWarning, match="write `term: information`"):
        old_reward = Reward(judge, RewardConfig.from_dict(old))
    new, before = Reward(judge)(items), old_reward(items)
    assert [r.value for r in new] == pytest.approx([r.value for r in before], abs=1e-9)
    assert [r.value for r in new] == pytest.approx(INFORMATION_BEFORE_TERM, abs=1e-4)
    assert all("term/information" in r.components and "guard/copy_credit" not in r.components for r in new)
