"""The PPO reward-model adapter: against TRL's own ``get_reward``, and a real PPO run on TRL 1.12.

PPOTrainer exists only in TRL 1.9-1.12 (``trl.experimental.ppo``); the test marked ``trl112`` runs
in the separate environment ``.venv-trl112`` (see docs/trainers.md for how to build it)::

    .venv-trl112/bin/python -m pytest -m trl112 tests/test_trainers_ppo.py
"""

import math

import pytest
import torch
from datasets import Dataset
from tiny_models import make_backend, make_tokenizer

from judge_reward import Item, Judge, JudgeConfig
from judge_reward.trainers.policy import tiny_policy
from judge_reward.trainers.ppo import JudgeRewardModel
from judge_reward.trainers.reward import JudgeReward, JudgeRewardConfig
from tests.doubles.faulty_backend import FaultyBackend

trl = pytest.importorskip("trl")
from trl.experimental.utils import get_reward  # noqa: E402  (both 1.12 and 1.16 ship it)

ARTICLES = [
    "The council met on Tuesday and approved the new budget for the city.",
    "A cat sat on the mat while the news article reported on the weather.",
]


def tiny_judge(fails=None):
    backend = make_backend("char")
    if fails is not None:
        backend = FaultyBackend(backend, fails)
    return Judge(JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="gptscore",
                             cache={"memory": fails is None}), backend=backend)


def prompt_rows(tok):
    return [{"input_ids": tok(f"Summarize: {a} Summary:")["input_ids"], "source": a} for a in ARTICLES]


def query_responses(tok, rows, responses):
    """What PPO passes get_reward: left-padded queries, then responses right-padded with pad."""
    pad = tok.pad_token_id
    width = max(len(r["input_ids"]) for r in rows)
    queries = [[pad] * (width - len(r["input_ids"])) + r["input_ids"] for r in rows]
    resp = [tok(t, add_special_tokens=False)["input_ids"] for t in responses]
    rlen = max(len(r) for r in resp) + 2
    return torch.tensor([q + r + [pad] * (rlen - len(r)) for q, r in zip(queries, resp)]), width


def test_adapter_gives_get_reward_the_judge_reward_at_the_last_response_token():
    tok = make_tokenizer("bpe")
    rows = prompt_rows(tok)
    judge = tiny_judge()
    reward = JudgeReward(judge, JudgeRewardConfig(normalise="none"))
    model = JudgeRewardModel(reward, tok, contexts=rows)
    responses = ["The council approved it.", "A cat sat."]
    qr, context_length = query_responses(tok, rows, responses)
    logits, final, lengths = get_reward(model, qr, tok.pad_token_id, context_length)
    assert logits.shape == (2, qr.shape[1], 1) and final.shape == (2,)
    want = [judge.score([Item(r, a)])[0]["coherence"].value for r, a in zip(responses, ARTICLES)]
    assert final.tolist() == pytest.approx(want, rel=1e-4)  # judged against each row's source column
    assert lengths.tolist() == [context_length + len(tok(r, add_special_tokens=False)["input_ids"]) - 1 for r in responses]
    # the metrics a PPO run cannot receive through log_metric wait for JudgeMetricsCallback
    metrics = model.drain_metrics()
    assert metrics["judge/latency_s"] > 0 and metrics["rewards/judge_coherence/filled"] == 0.0
    assert model.drain_metrics() == {}


def test_adapter_fills_failed_judgments_and_splits_by_marker():
    tok = make_tokenizer("bpe")
    rows = prompt_rows(tok)
    reward = JudgeReward(tiny_judge(fails=lambda k, text: "FAIL" in text), JudgeRewardConfig(normalise="none"))
    model = JudgeRewardModel(reward, tok, contexts=rows)
    qr, cl = query_responses(tok, rows, ["The council approved it.", "A cat sat."])
    _, first, _ = get_reward(model, qr, tok.pad_token_id, cl)
    qr, cl = query_responses(tok, rows, ["The council approved it.", "FAIL"])
    _, second, _ = get_reward(model, qr, tok.pad_token_id, cl)
    ok = [first[0].item(), first[1].item(), second[0].item()]
    assert second[1].item() == pytest.approx(sum(ok) / 3)  # running mean of the successful rewards, not 0
    assert model.filled == 1 and reward.failures == {"injected fault: server error": 1}
    fixed = JudgeRewardModel(reward, tok, contexts=rows, on_failure=-10.0)
    assert get_reward(fixed, qr, tok.pad_token_id, cl)[1][1].item() == -10.0
    # without contexts, a marker in the prompt splits prompt from response (the prompt is the source)
    marker = JudgeRewardModel(JudgeReward(tiny_judge(), JudgeRewardConfig(normalise="none")), tok, response_marker="Summary:")
    qr, cl = query_responses(tok, rows, ["The council approved it.", "A cat sat."])
    _, by_marker, _ = get_reward(marker, qr, tok.pad_token_id, cl)
    judge = tiny_judge()
    want = judge.score([Item(" The council approved it.", f"Summarize: {ARTICLES[0]} Summary:")])[0]["coherence"].value
    assert by_marker[0].item() == pytest.approx(want, rel=1e-4)
    with pytest.raises(ValueError, match=r"contexts\[0\].input_ids: expected a non-empty list of token ids"):
        JudgeRewardModel(reward, tok, contexts=[{"input_ids": []}])
    with pytest.raises(ValueError, match=r"on_failure: expected 'running_mean' or a finite number, got 'zero'"):
        JudgeRewardModel(reward, tok, contexts=rows, on_failure="zero")
    # every row failing before any success: no mean to fill with, so an error naming the failure, not a 0
    failing = JudgeReward(tiny_judge(fails=lambda k, text: True), JudgeRewardConfig(normalise="none"))
    with pytest.raises(RuntimeError, match=r"the judge failed on all 2 rows before any reward succeeded "
                                           r"\(injected fault: server error \(2\)\)"):
        get_reward(JudgeRewardModel(failing, tok, contexts=rows), qr, tok.pad_token_id, cl)
    assert get_reward(JudgeRewardModel(failing, tok, contexts=rows, on_failure=-1.0), qr, tok.pad_token_id, cl)[1].tolist() == [-1.0, -1.0]
    lost = JudgeRewardModel(reward, tok, contexts=rows[:1])
    with pytest.raises(ValueError, match=r"query_responses: a row matches no context's input_ids"):
        get_reward(lost, qr, tok.pad_token_id, cl)


def _ppo_available() -> bool:
    try:
        from trl.experimental.ppo import PPOTrainer  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.trl112
@pytest.mark.skipif(not _ppo_available(), reason=f"PPOTrainer was removed after TRL 1.12 (this is {trl.__version__}); "
                    "run `.venv-trl112/bin/python -m pytest -m trl112 tests/test_trainers_ppo.py`")
def test_ppo_trains_with_the_judge_reward_model(tmp_path, monkeypatch):
    from transformers import AutoModelForSequenceClassification
    from trl.experimental.ppo import PPOConfig, PPOTrainer

    from judge_reward.trainers.callbacks import attach_judge_metrics
    from wandb_offline import finish_run, read_history

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    tok = make_tokenizer("bpe")
    tok.padding_side = "left"  # PPO generates after left-padded queries
    rows = prompt_rows(tok) * 4
    policy = tiny_policy(tok, hidden_size=32)
    value_config = tiny_policy(tok, hidden_size=32).config
    value_config.num_labels = 1
    value = AutoModelForSequenceClassification.from_config(value_config)
    reward = JudgeReward(tiny_judge(fails=lambda k, text: k == 0), JudgeRewardConfig(normalise="unit"))
    reward_model = JudgeRewardModel(reward, tok, contexts=rows)
    args = PPOConfig(
        output_dir=str(tmp_path / "ppo"), per_device_train_batch_size=4, gradient_accumulation_steps=1,
        total_episodes=8, num_ppo_epochs=1, num_mini_batches=1, response_length=6, num_sample_generations=0,
        learning_rate=1e-3, use_cpu=True, bf16=False, report_to=["wandb"], logging_steps=1, save_strategy="no",
        missing_eos_penalty=None, stop_token=None,
    )
    trainer = PPOTrainer(args=args, processing_class=tok, model=policy, ref_model=None, reward_model=reward_model,
                         value_model=value, train_dataset=Dataset.from_list([{"input_ids": r["input_ids"]} for r in rows]))
    attach_judge_metrics(trainer, reward_model)
    before = {n: p.detach().clone() for n, p in policy.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2  # 8 episodes / batches of 4: two PPO updates
    assert any(not torch.equal(before[n], p) for n, p in policy.named_parameters())
    rows_logged = [r for r in trainer.state.log_history if "objective/scores" in r]
    assert len(rows_logged) == 2
    for r in rows_logged:
        assert 0 < r["objective/scores"] <= 1 and math.isfinite(r["objective/rlhf_reward"])
        assert r["judge/latency_s"] > 0 and r["rewards/judge_coherence/filled"] == 1.0  # the injected failure
    assert reward_model.filled == 2
    history = read_history(finish_run())
    assert any("train/judge/latency_s" in row and "train/objective/scores" in row for row in history)
