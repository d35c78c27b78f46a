"""Four G-Eval aspects vs one when the model's work costs next to nothing: what is left is the
per-call and per-row work around the model (tokenising, building rows and masks, reading the scale
values), the part that dominates on a GPU, measured on a CPU.

The judge is a random Gemma 3 with the embedded judge's configuration (18 layers, its sliding and
full attention layers, its 262k vocabulary) but hidden size 64, behind the embedded judge's real
tokenizer, scoring the 16 summaries of one SummEval article with G-Eval (exact, ``shared`` layout),
cache off and the backend's token memo cleared before every run. Prints medians [min-max] of
``--repeats`` runs for one aspect and for four, their ratio, and with ``--profile`` the functions
that take the most time in one four-aspect run.

    python benchmarks/geval_fixed_costs.py              # ~1 min on 2 CPU cores
    python benchmarks/geval_fixed_costs.py --profile
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics

from _common import median_range, summeval, timings
from judge_reward import Item, Judge, JudgeConfig

ASPECTS = ["coherence", "consistency", "fluency", "relevance"]


def tiny_judge_backend():
    """The embedded judge's tokenizer and configuration, with hidden size 64 and random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from judge_reward.backends.hf import HFBackend, HFBackendConfig
    from judge_reward.backends.loading import converted_directory, resolve_model

    directory = str(converted_directory(resolve_model("embedded:gemma3-270m")))
    config = AutoConfig.from_pretrained(directory)
    config.hidden_size, config.intermediate_size, config.head_dim = 64, 128, 32
    config.num_attention_heads = config.num_key_value_heads = 1
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    return HFBackend(HFBackendConfig(progress=False, device="cpu"), model=model, tokenizer=tokenizer, model_id="tiny-gemma3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="also profile one four-aspect run")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    backend = tiny_judge_backend()
    items = [Item(r["system_output"], r["source"]) for r in summeval(1)[0]]
    judge = Judge(JudgeConfig(method="geval", aspects=ASPECTS, cache={"memory": False},
                              backend={"kind": "hf", "progress": False}), backend=backend)
    judge.score(items[:2], aspects=ASPECTS)  # warm-up
    fresh = backend.clear_token_memo
    one, _ = timings(lambda: judge.score(items, aspects=["relevance"]), args.repeats, fresh)
    four, _ = timings(lambda: judge.score(items, aspects=ASPECTS), args.repeats, fresh)
    print(f"{len(items)} summaries of one SummEval article, G-Eval (shared layout), a random Gemma 3 of hidden "
          f"size 64 behind the embedded judge's tokenizer; {args.threads} torch threads; medians [min-max] of "
          f"{args.repeats} runs")
    print(f"1 aspect {median_range(one, 3)} s   4 aspects {median_range(four, 3)} s   "
          f"ratio {statistics.median(four) / statistics.median(one):.2f}x")
    if args.profile:
        fresh()
        profile = cProfile.Profile()
        profile.runcall(judge.score, items, aspects=ASPECTS)
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
