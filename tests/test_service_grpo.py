"""A GRPO run (TRL 1.16, tiny in-process policy, 2 steps) whose rewards come from the reward service."""

from __future__ import annotations

import pytest

from judge_reward.judge import Judge, JudgeConfig
from judge_reward.methods.base import Item
from judge_reward.service import ServiceConfig, ServiceRewardFunction, create_app
from judge_reward.service.server import ServerThread
from wandb_offline import find_offline_runs, read_history
from tiny_models import make_backend, make_model, make_tokenizer

ARTICLES = [
    "The council met on Tuesday. It approved a new park and a cycle lane beside the river.",
    "Heavy rain flooded the market square. Traders moved their stalls to the station hall.",
]


def judge() -> Judge:
    cfg = JudgeConfig(aspects_file="summeval", aspects=["coherence"], method="geval", cache={"memory": False})
    return Judge(cfg, backend=make_backend("char"))


class Recorded(ServiceRewardFunction):
    """The service reward function, keeping what TRL passed in and what it got back."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen: list[tuple[list, list, list]] = []

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        rewards = await super().__call__(prompts, completions, completion_ids, **kwargs)
        self.seen.append((list(prompts), list(completions), list(rewards)))
        assert {"trainer_state", "log_metric", "log_extra", "article"} <= set(kwargs)
        return rewards


def test_grpo_gets_rewards_from_the_service(tmp_path, monkeypatch):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_PROJECT", "judge-reward-tests")
    tok = make_tokenizer("char")
    policy = make_model(tok, "llama", seed=7)
    prompts = [f"Summarise: {a}\nSummary:" for a in ARTICLES]
    data = Dataset.from_dict({"prompt": prompts * 2, "article": ARTICLES * 2})
    cfg = ServiceConfig(port=0, log_level="warning", max_wait_ms=5.0)
    with ServerThread(create_app(cfg, judge=judge()), cfg) as server:
        reward = Recorded(url=server.url, source_column="article", timeout_s=60)
        args = GRPOConfig(
            output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, num_generations=4,
            max_completion_length=12, learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to=["wandb"],
            use_cpu=True, bf16=False, seed=0, temperature=1.0, run_name="service-grpo",
        )
        trainer = GRPOTrainer(model=policy, reward_funcs=[reward], args=args, train_dataset=data,
                              processing_class=tok)
        trainer.train()
        import wandb

        wandb.finish()  # flush the offline run's files
        served = server.app.state.service.metrics.registry.get_sample_value(
            "judge_reward_requests_total", {"endpoint": "/v1/score", "status": "200"})

    assert trainer.state.global_step == 2
    assert len(reward.seen) == 2 and served == 2  # one service request per reward call, all answered
    # Every reward TRL got is the service's score of that very completion against its article.
    reference = judge()
    for prompts_seen, completions, rewards in reward.seen:
        assert len(completions) == 4
        items = [Item(c, ARTICLES[prompts.index(p)]) for p, c in zip(prompts_seen, completions)]
        want = [res["coherence"] for res in reference.score(items)]
        for got, w in zip(rewards, want):
            if w.value is None:  # an empty completion: None, counted
                assert got is None
            else:
                assert got == pytest.approx((w.value - 1) / 4, abs=1e-6)
    logged = [h for h in trainer.state.log_history if "rewards/judge_service/mean" in h]
    assert len(logged) == 2
    assert "judge_service/failure_rate" in logged[0]
    # wandb (offline) wrote the run with the service's reward and failure-rate metrics in it
    # (protobuf stores history keys as plain UTF-8, so they can be found in the transaction log).
    runs = find_offline_runs(tmp_path / "wandb")
    assert len(runs) == 1
    history = read_history(runs[0])  # once wandb-core has written the run's exit record
    keys = {k for row in history for k in row}  # under the W&B callback's train/ prefix
    assert {"train/rewards/judge_service/mean", "train/judge_service/failure_rate"} <= keys, sorted(keys)
