"""G-Eval: the exact distribution from one forward pass vs the paper's n=20 samples at temperature 1.

Same model, same prompts; prints both times per item and the ratio.

    python benchmarks/geval_exact_vs_sampling.py --items 4
"""

from __future__ import annotations

import argparse
import time

from _common import device_line, summeval
from judge_reward import GEval, GEvalConfig, Item, load_aspects
from judge_reward.backends.hf import HFBackend, HFBackendConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=4)
    args = parser.parse_args()
    aspect = load_aspects("summeval").get("coherence")
    doc = summeval(1)[0]
    items = [Item(r["system_output"], r["source"]) for r in doc[: args.items]]
    backend = HFBackend(HFBackendConfig(progress=False))
    print(f"{backend.model_id}, {backend.dtype}; {device_line(backend.device)}")
    layout = "guarded"  # the layout the README row was measured with; both modes read the same prompt
    GEval(GEvalConfig(layout=layout)).score(backend, aspect, items[:1])  # warm-up
    backend.clear_token_memo()  # each way tokenises its texts as if new
    start = time.perf_counter()
    exact = GEval(GEvalConfig(layout=layout)).score(backend, aspect, items)
    t_exact = time.perf_counter() - start
    backend.clear_token_memo()
    start = time.perf_counter()
    sampled = GEval(GEvalConfig(mode="sampling", n=20, temperature=1.0, max_new_tokens=4, layout=layout)).score(backend, aspect, items)
    t_sample = time.perf_counter() - start
    for e, s in zip(exact, sampled):
        print(f"exact {e.value:.3f} (mass {e.details['mass']:.3f})   sampled {s.value if s.value is None else round(s.value, 3)} "
              f"({len(s.details.get('ratings', []))}/20 parsed)")
    print(f"exact: {t_exact / len(items):.2f} s/item   sampling n=20: {t_sample / len(items):.2f} s/item   "
          f"speedup {t_sample / t_exact:.1f}x")


if __name__ == "__main__":
    main()
