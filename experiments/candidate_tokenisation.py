"""What tokenising G-Eval's rows costs: whole texts, the last line per candidate, and kept heads.

The rows of a four-aspect G-Eval call on the 16 summaries of one SummEval article (``shared``
layout, the embedded judge's tokenizer): each row needs the ids of its prompt and of the prompt with
each scale value. Three ways, each giving the same ids:

* ``whole text per candidate``: every one a whole-text tokenisation (six per row; before issue 17);
* ``last line per candidate``: the prompt tokenised once, each value re-tokenising only the prompt's
  last line (:func:`judge_reward.candidates.tokenize_candidates`);
* ``+ kept heads``: as the backend now tokenises: the four aspects' prompts of a summary differ only
  in that last line, so the head they share is tokenised once per summary (``HFBackend._encode_piece``;
  its memo is cleared before each run).

Prints the medians [min-max] of ``--repeats`` runs of each way, the ratios, and whether the ids agree.

    python experiments/candidate_tokenisation.py      # ~1 min on 2 CPU cores
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common.py and the benchmark scripts this study reuses
from _common import median_range, summeval, timings  # noqa: E402
from judge_reward import load_aspects  # noqa: E402
from judge_reward.backends.hf import HFBackend, HFBackendConfig  # noqa: E402
from judge_reward.candidates import tokenize_candidates  # noqa: E402
from judge_reward.prompts.geval import build_geval_prompt  # noqa: E402

ASPECTS = ("coherence", "consistency", "fluency", "relevance")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    backend = HFBackend(HFBackendConfig(progress=False, device="cpu"))
    aspects = load_aspects("summeval")
    panel = [(aspects.get(name), aspects.get(name).steps) for name in ASPECTS]  # a four-aspect judge's prompts
    rows = []
    for r in summeval(1)[0]:
        for aspect, steps in panel:
            prompt = build_geval_prompt(aspect, r["source"], r["system_output"], steps, panel=panel).text
            rows.append((prompt, aspect.scale.texts))
    whole_text = lambda text: backend.tokenizer(text, add_special_tokens=True)["input_ids"]  # noqa: E731
    fresh = backend.clear_token_memo
    whole, slow = timings(lambda: [tokenize_candidates(whole_text, p, c) for p, c in rows], args.repeats)
    line, fast = timings(lambda: [tokenize_candidates(whole_text, p, c, backend._tokenize_many) for p, c in rows],
                         args.repeats)
    kept, fastest = timings(lambda: [tokenize_candidates(backend.encode, p, c, backend._tokenize_many) for p, c in rows],
                            args.repeats, fresh)
    tokens = sum(len(whole_text(p)) for p, _ in rows)
    print(f"{len(rows)} G-Eval rows (16 summaries x 4 aspects, {tokens} prompt tokens), {args.repeats} runs each")
    print(f"whole text per candidate: {median_range(whole, 3)} s")
    print(f"last line per candidate:  {median_range(line, 3)} s   "
          f"{statistics.median(whole) / statistics.median(line):.1f}x; same ids: {fast == slow}")
    print(f"+ kept heads:             {median_range(kept, 3)} s   "
          f"{statistics.median(whole) / statistics.median(kept):.1f}x; same ids: {fastest == slow}")


if __name__ == "__main__":
    main()
