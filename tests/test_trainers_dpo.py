"""Preference pairs labelled by the judge, DPO on them, and OnlineDPO with the judge (TRL 1.16)."""

import math

import pytest
import torch
from datasets import Dataset
from tiny_models import make_backend, make_tokenizer

from judge_reward import ConfigError, Item, Judge, JudgeConfig
from judge_reward.trainers.callbacks import attach_judge_metrics
from judge_reward.trainers.pairs import PairLabelConfig, label_pairs
from judge_reward.trainers.policy import CHAT_TEMPLATE, tiny_policy
from judge_reward.trainers.reward import AsyncJudgeReward, JudgeRewardConfig
from tests.doubles.faulty_backend import FaultyBackend
from wandb_offline import finish_run, read_history

trl = pytest.importorskip("trl")
pytestmark = pytest.mark.skipif(not trl.__version__.startswith("1.16"), reason="pinned to TRL 1.16")

ARTICLE = "The council met on Tuesday and approved the new budget for the city."
ARTICLE2 = "A cat sat on the mat while the news article reported on the weather."


def tiny_judge(method="gptscore", aspects=("coherence",), aspects_file="summeval", fails=None):
    backend = make_backend("char")
    if fails is not None:
        backend = FaultyBackend(backend, fails)
    cfg = JudgeConfig(aspects_file=aspects_file, aspects=list(aspects), method=method, cache={"memory": fails is None})
    return Judge(cfg, backend=backend)


def candidate_rows():
    return [
        {"prompt": f"Summarize: {ARTICLE}", "source": ARTICLE, "human": [4.0, 2.0, 3.0, 1.0],
         "completions": ["The council approved the budget.", "Budget.", "The city has a budget now.", "Cats sat."]},
        {"prompt": f"Summarize: {ARTICLE2}", "source": ARTICLE2, "human": [1.0, 5.0, 2.0, 2.0],
         "completions": ["Weather.", "A cat sat on the mat.", "The news reported.", "FAIL the judge here"]},
    ]


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield tmp_path / "wandb"
    import wandb

    if wandb.run is not None:
        wandb.finish()
    wandb.teardown()  # the next test's WANDB_DIR must be read afresh


def test_pointwise_labels_pick_best_and_worst_with_a_margin():
    judge = tiny_judge(fails=lambda k, text: "FAIL" in text)
    rows = candidate_rows()
    cfg = PairLabelConfig(human_column="human", reward=JudgeRewardConfig(normalise="none"))
    data, labeler = label_pairs(judge, rows, cfg, progress=False)
    clean = tiny_judge()
    assert len(data) == 2
    for row, ex in zip(rows, data):
        scored = [(k, clean.score([Item(c, row["source"])])[0]["coherence"].value) for k, c in enumerate(row["completions"])
                  if "FAIL" not in c]  # the failed candidate is left out, never scored 0
        best = max(scored, key=lambda t: t[1])
        worst = min(scored, key=lambda t: t[1])
        assert (ex["chosen_index"], ex["rejected_index"]) == (best[0], worst[0])
        assert ex["chosen"] == row["completions"][best[0]] and ex["rejected"] == row["completions"][worst[0]]
        assert ex["margin"] == pytest.approx(best[1] - worst[1], rel=1e-3)
        assert ex["chosen_human"] == row["human"][best[0]]
    summary = labeler.summary()
    assert summary["candidates_failed"] == 1 and summary["pairs"] == 2
    assert summary["human_agrees"] + summary.get("human_disagrees", 0) + summary.get("human_ties", 0) == 2
    # a margin between the two rows' margins keeps only the larger one
    lo, hi = sorted(data["margin"])
    data2, labeler2 = label_pairs(judge, rows, PairLabelConfig(min_margin=(lo + hi) / 2, reward=JudgeRewardConfig(normalise="none")), progress=False)
    assert data2["margin"] == [pytest.approx(hi)] and labeler2.summary()["rows_below_margin"] == 1
    # "all": every pair whose gap passes, the better candidate first
    data3, _ = label_pairs(clean, rows[:1], PairLabelConfig(pairs="all", reward=JudgeRewardConfig(normalise="none")), progress=False)
    assert len(data3) == 6 and all(m > 0 for m in data3["margin"])
    # a row with one scorable candidate yields no pair, counted, in both modes
    lone = [{"prompt": "p", "source": ARTICLE, "completions": ["The council approved the budget.", "FAIL here"]}]
    for pairs in ("best_worst", "all"):
        data4, labeler4 = label_pairs(judge, lone, PairLabelConfig(pairs=pairs, reward=JudgeRewardConfig(normalise="none")),
                                      progress=False)
        assert len(data4) == 0 and labeler4.summary()["rows_too_few_scored"] == 1, pairs


def test_pointwise_pairs_use_the_judge_configs_reward_with_its_guards():
    """By default a candidate's reward is the one a trainer built from the judge config gets, guards
    included: a pair must not prefer what that reward would penalise."""
    judge = tiny_judge()
    judge.config.reward = {"normalise": "none", "guards": {"length": {"enabled": True, "min_words": 4, "weight": 100.0}}}
    rows = [{"prompt": "p", "source": ARTICLE, "completions": ["Budget.", "The council approved the new budget."]}]
    data, labeler = label_pairs(judge, rows, PairLabelConfig(), progress=False)
    assert labeler.reward.reward.guards.length.enabled
    assert (data[0]["chosen_index"], data[0]["rejected_index"]) == (1, 0) and data[0]["margin"] > 50
    plain, _ = label_pairs(judge, rows, PairLabelConfig(reward=JudgeRewardConfig(normalise="none")), progress=False)
    assert plain[0]["margin"] < 50  # an explicit reward config replaces the section


def test_conversational_prompts_give_assistant_turns_and_bad_rows_are_named():
    judge = tiny_judge()
    rows = [{"prompt": [{"role": "user", "content": ARTICLE}], "completions": ["Budget approved.", "Cats."]}]
    data, _ = label_pairs(judge, rows, PairLabelConfig(), progress=False)
    assert data[0]["prompt"] == rows[0]["prompt"]
    assert data[0]["chosen"][0]["role"] == "assistant" and data[0]["chosen"][0]["content"] in rows[0]["completions"]
    with pytest.raises(ValueError, match=r"rows\[0\].completions: expected a list of candidate completions"):
        label_pairs(judge, [{"prompt": "p", "completions": "just one"}], progress=False)
    with pytest.raises(ValueError, match=r"rows\[1\].prompt: text, but rows\[0\].prompt is chat messages; a pair "
                                         r"dataset holds one prompt format"):  # was an Arrow error after judging
        label_pairs(judge, [rows[0], {"prompt": ARTICLE, "completions": ["a", "b"]}], progress=False)
    with pytest.raises(ValueError, match=r"rows\[1\].prompt: required column is missing"):
        label_pairs(judge, [rows[0], {"completions": ["a", "b"]}], progress=False)
    with pytest.raises(ValueError, match=r"rows\[0\].human\[1\]: expected a number"):
        label_pairs(judge, [{"prompt": "p", "completions": ["a", "b"], "human": [1, "x"]}],
                    PairLabelConfig(human_column="human"), progress=False)
    with pytest.raises(ConfigError, match=r"label.min_margin: expected a non-negative number, got -1"):
        PairLabelConfig(min_margin=-1)
    with pytest.raises(ConfigError, match=r"label.mode: 'pairwise' needs a judge method that rates on a scale"):
        label_pairs(judge, rows, PairLabelConfig(mode="pairwise"), progress=False)


def test_pairwise_labels_average_both_positions():
    aspects_file = "configs/train/pairwise_aspects.yaml"
    judge = tiny_judge("geval", aspects=("pairwise_preference",), aspects_file=aspects_file)
    rows = [{"prompt": ARTICLE, "completions": ["The council approved the budget.", "Budget.", "Cats sat."]}]
    cfg = PairLabelConfig(mode="pairwise", pairs="all", require_agreement=False)
    data, labeler = label_pairs(judge, rows, cfg, progress=False)
    aspect = judge.aspect_set.get("pairwise_preference")

    def pref_second(a, b):  # the judge's preference for the second shown candidate, in [-1, 1]
        s = judge.score([Item(f"Summary A:\n{a}\n\nSummary B:\n{b}", ARTICLE)])[0]["pairwise_preference"].value
        return 2 * aspect.scale.normalise(s) - 1

    c = rows[0]["completions"]
    for ex in data:
        i, j = ex["chosen_index"], ex["rejected_index"]
        debiased = (pref_second(c[j], c[i]) - pref_second(c[i], c[j])) / 2  # how much better i is than j
        assert ex["margin"] == pytest.approx(debiased, abs=1e-4) and ex["margin"] > 0
    assert len(data) + labeler.summary().get("pairs_below_margin", 0) == 3
    # requiring the two orders to agree drops the pairs where the position decided the winner
    strict, strict_labeler = label_pairs(judge, rows, PairLabelConfig(mode="pairwise", pairs="all"), progress=False)
    assert len(strict) + strict_labeler.summary().get("pairs_position_inconsistent", 0) \
        + strict_labeler.summary().get("pairs_below_margin", 0) == 3


def test_dpo_trains_on_judge_labelled_pairs(tmp_path, wandb_offline):
    from trl import DPOConfig, DPOTrainer

    judge = tiny_judge(fails=lambda k, text: "FAIL" in text)
    rows = candidate_rows() * 2
    pairs, labeler = label_pairs(judge, rows, PairLabelConfig(), progress=False)
    assert len(pairs) == 4 and labeler.summary()["candidates_failed"] == 2
    tok = make_tokenizer("bpe")
    policy = tiny_policy(tok, hidden_size=32)
    policy.save_pretrained(tmp_path / "policy")  # DPO builds its reference model from the policy's path
    args = DPOConfig(output_dir=str(tmp_path / "dpo"), per_device_train_batch_size=2, max_steps=2, logging_steps=1,
                     learning_rate=1e-3, use_cpu=True, bf16=False, report_to=["wandb"], save_strategy="no", max_length=128)
    trainer = DPOTrainer(model=str(tmp_path / "policy"), args=args, train_dataset=pairs, processing_class=tok)
    attach_judge_metrics(trainer, labeler)
    trainer.train()
    assert trainer.state.global_step == 2
    logs = [r for r in trainer.state.log_history if "loss" in r]
    assert len(logs) == 2 and all(math.isfinite(r["loss"]) for r in logs)
    assert any("rewards/margins" in r for r in logs)  # DPO's implicit reward on the judge's pairs
    assert logs[0]["judge/pairs/pairs"] == 4.0 and logs[0]["judge/pairs/candidates_failed"] == 2.0
    history = read_history(finish_run())
    assert any(row.get("train/judge/pairs/margin_mean", 0) > 0 for row in history)


def test_online_dpo_with_the_judge_logs_metrics_and_failed_rewards_lose(tmp_path, wandb_offline):
    from judge_reward.trainers.online_dpo import JudgeOnlineDPOTrainer, OnlineDPOConfig

    tok = make_tokenizer("bpe")
    tok.chat_template = CHAT_TEMPLATE
    model = tiny_policy(tok, hidden_size=32)
    judge = tiny_judge(fails=lambda k, text: k == 0)  # the first completion of every batch fails
    reward = AsyncJudgeReward(judge, JudgeRewardConfig(normalise="none"))  # OnlineDPO has no event loop: run here
    rows = [{"prompt": f"Summarize: {a}", "source": a} for a in (ARTICLE, ARTICLE2)] * 4
    args = OnlineDPOConfig(output_dir=str(tmp_path / "odpo"), per_device_train_batch_size=2, max_steps=2,
                           logging_steps=1, max_new_tokens=6, learning_rate=1e-3, use_cpu=True, bf16=False,
                           report_to=["wandb"], save_strategy="no")
    trainer = JudgeOnlineDPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=Dataset.from_list(rows),
                                    processing_class=tok)
    trainer.train()
    logs = [r for r in trainer.state.log_history if "loss" in r]
    assert len(logs) == 2
    for r in logs:
        assert r["rewards/judge_coherence/failures"] == 1.0 and r["judge/latency_s"] > 0
        assert r["rewards/unscorable_completions"] == 1.0 and r["rewards/unscorable_pairs"] == 0.0
        assert r["objective/scores"] < 0 and math.isfinite(r["objective/scores_margin"])  # log-probs, not a 0
    history = read_history(finish_run())
    assert any("train/judge/coherence/mean" in row and "train/rewards/unscorable_completions" in row for row in history)

    # the pair rule, on the trainer itself: rows i and i + 3 are the two completions of prompt i
    values = [None, -2.0, None, -1.0, -3.0, None]

    def preset(prompts, completions, **kwargs):
        return list(values)

    preset.__name__ = "preset"
    plain_cls = JudgeOnlineDPOTrainer.__mro__[1]
    for cls in (JudgeOnlineDPOTrainer, plain_cls):
        t = cls(model=tiny_policy(tok, hidden_size=32), reward_funcs=preset, args=args,
                train_dataset=Dataset.from_list(rows), processing_class=tok)
        total = t._calculate_rewards_from_functions(["p"] * 6, ["c"] * 6, [[1]] * 6)
        first, second = total[:3], total[3:]
        if cls is plain_cls:  # TRL's nansum makes the failed completion a 0: it beats a scored -1.0
            assert total[0] == 0.0 and bool(first[0] >= second[0])
            continue
        assert bool(first[0] < second[0]) and total[0] == pytest.approx(-1.0)  # failed side loses, just below
        assert total[1] == -2.0 and total[4] == -3.0
        assert total[2] == total[5] == pytest.approx(-2.0)  # both failed: the batch's mean reward on both sides
        assert t._judge_metrics["rewards/unscorable_pairs"] == [1.0]
        assert not torch.isnan(total).any()
