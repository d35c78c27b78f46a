"""What tokenising G-Eval's slot candidates costs: whole prompt + value per candidate vs the last line.

The rows of a four-aspect G-Eval call on the 16 summaries of one SummEval article (``shared``
layout, the embedded judge's tokenizer): each row needs the ids of its prompt and of the prompt with
each scale value. Before issue 17's change every one was a whole-text tokenisation (six per row);
now the prompt is tokenised once and each value re-tokenises only the prompt's last line
(:func:`judge_reward.candidates.tokenize_candidates`). Prints the medians [min-max] of
``--repeats`` runs of each way, the ratio, and whether the ids agree.

    python benchmarks/candidate_tokenisation.py      # ~1 min on 2 CPU cores
"""

from __future__ import annotations

import argparse
import statistics

from _common import median_range, summeval, timings
from judge_reward import load_aspects
from judge_reward.backends.hf import HFBackend, HFBackendConfig
from judge_reward.candidates import tokenize_candidates
from judge_reward.prompts.geval import build_geval_prompt

ASPECTS = ("coherence", "consistency", "fluency", "relevance")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    backend = HFBackend(HFBackendConfig(progress=False, device="cpu"))
    aspects = load_aspects("summeval")
    rows = []
    for r in summeval(1)[0]:
        for name in ASPECTS:
            aspect = aspects.get(name)
            rows.append((build_geval_prompt(aspect, r["source"], r["system_output"], aspect.steps).text, aspect.scale.texts))
    whole, slow = timings(lambda: [tokenize_candidates(backend.encode, p, c) for p, c in rows], args.repeats)
    line, fast = timings(lambda: [tokenize_candidates(backend.encode, p, c, backend._encode_piece) for p, c in rows],
                         args.repeats)
    tokens = sum(len(backend.encode(p)) for p, _ in rows)
    print(f"{len(rows)} G-Eval rows (16 summaries x 4 aspects, {tokens} prompt tokens), {args.repeats} runs each")
    print(f"whole text per candidate: {median_range(whole, 3)} s")
    print(f"last line per candidate:  {median_range(line, 3)} s   "
          f"{statistics.median(whole) / statistics.median(line):.1f}x; same ids: {fast == slow}")


if __name__ == "__main__":
    main()
