"""Where does a wrapper's gain in the information term come from? Two baselines compared offline.

``default``'s information is what reading the source adds to the output's token log-probabilities
(copied tokens 0), over a 32-token budget, against the judge's reading with no source at all. An
unlisted wrapper ("My quick take on the story:") still beats some highlights
(``experiments/unlisted_wrappers.py``). This script scores the relevance aspect's information of the
first ``--docs`` SummEval highlights and of wrapped copies of them under:

* ``none``: the shipped baseline (the instruction without a source);
* ``other``: the same instruction after another article (SummEval's 100th, cut alike), so that
  text about "the story" or "the article" is as likely in the baseline as given the real source;
* ``clipped``: the shipped baseline with every token's gain clipped below at 0, so that pushing
  the highlight's last tokens out of the budget cannot raise it.

It prints, per wrapper and baseline, on how many articles the wrapped text's information beats the
highlight's, and the mean difference. The information term alone, without the floor or the other
guards, so the win rates are higher than the whole reward's. ~1 minute on 2 CPU cores.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python experiments/wrapper_information.py --docs 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import data_dir  # noqa: E402
from probe_summeval import summeval_pairs  # noqa: E402

WRAPPERS = {
    "quick_take": "My quick take on the story:\n{o}",
    "main_points": "The main points, in a couple of sentences:\n{o}",
    "to_sum_up": "To sum it up for you:\n{o}",
    "sure_here": "Sure! Here is the summary:\n\n{o}",
    "hi_there": "Hi there! {o}",
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="judge config (its backend; name or path)")
    p.add_argument("--docs", type=int, default=20)
    p.add_argument("--max-source-words", type=int, default=400)
    p.add_argument("--budget", type=int, default=32)
    p.add_argument("--data", type=Path, default=None,
                   help="data folder holding summeval/summeval.json (default: $JUDGE_REWARD_DATA or ../shared/data)")
    args = p.parse_args(argv)
    data = data_dir(args.data / "summeval" / "summeval.json" if args.data else None, "summeval", "summeval.json")

    from judge_reward import Judge
    from judge_reward.aspects import load_aspects
    from judge_reward.backends.base import ContinuationRequest
    from judge_reward.guards import SourceStats, copied_token_mask, source_information
    from judge_reward.prompts.gptscore import build_gptscore_prompt, unconditional_context

    every = summeval_pairs(data, 100, max_source_words=args.max_source_words)
    other, pairs = every[-1].source, every[:args.docs]
    judge = Judge.from_config(args.config)
    aspect = load_aspects("summeval").get("relevance")
    texts = {"real": "{o}", **WRAPPERS}
    requests, keys = [], []
    for i, pair in enumerate(pairs):
        for name, wording in texts.items():
            output = wording.format(o=pair.output.strip())
            given = build_gptscore_prompt(aspect, pair.source, output, layout="source_first")
            elsewhere = build_gptscore_prompt(aspect, other, output, layout="source_first")
            alone = unconditional_context(aspect, "source_first")
            for kind, context, group in (("given", given.context, given.shared), ("other", elsewhere.context, elsewhere.shared),
                                         ("none", alone, alone)):
                requests.append(ContinuationRequest(context, given.continuation, group=group))
                keys.append((i, name, kind))
    got = dict(zip(keys, judge.backend.continuation_logprobs(requests)))

    info: dict[tuple, float] = {}
    for i, pair in enumerate(pairs):
        source = SourceStats(pair.source)
        for name, wording in texts.items():
            given = got[i, name, "given"]
            mask = copied_token_mask(given.tokens, " " + wording.format(o=pair.output.strip()), source, 4, 8)
            for base in ("none", "other"):
                info[i, name, base] = source_information(given.token_logprobs, got[i, name, base].token_logprobs, mask, args.budget)
            gains = [0.0 if m else max(0.0, c - u) for c, u, m in zip(given.token_logprobs, got[i, name, "none"].token_logprobs, mask)]
            info[i, name, "clipped"] = sum(gains[:args.budget]) / args.budget
    print(f"relevance information of {len(pairs)} SummEval highlights and wrapped copies, budget {args.budget} tokens")
    print("| wrapper | baseline | beats the highlight | mean difference |")
    print("|---|---|---:|---:|")
    for name in WRAPPERS:
        for base in ("none", "other", "clipped"):
            diffs = [info[i, name, base] - info[i, "real", base] for i in range(len(pairs))]
            print(f"| {name} | {base} | {sum(d > 0 for d in diffs)}/{len(diffs)} | {statistics.mean(diffs):+.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
