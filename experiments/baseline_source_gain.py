"""What does a sentence gain from its source: over no source, or over another article?

The ``lift`` guard charges a sentence whose tokens gain less than ``min_information`` nats per
token from the source (:func:`judge_reward.guards.sentence_lift`). The gain is ``with_source -
without_source`` (:class:`judge_reward.methods.base.TokenLogprobs`), and what ``without_source``
reads is ``gptscore.baseline_source``: nothing but the instruction (unset), or another article in
the source's place (``news``). This script measures each sentence's gain (the mean over its tokens
and the config's aspects) under both, on two sets of real summaries:

* Zhang et al.'s (2023) first writer summary of each of their first ``--articles`` articles;
* SummEval's first ``--articles`` human highlights;

for the real summaries' own sentences (their first sentence apart: at the start of the output any
summary-like opening is likelier after an article than after nothing) and for the generic sentences
of ``experiments/unlisted_filler.py`` added to them (the added sentence's gain, per wording).

    JUDGE_REWARD_DATA=../shared/data PYTHONPATH=. python experiments/baseline_source_gain.py \\
        --config default --dtype float32 --cache judgments.sqlite
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "experiments"))

from _common import chosen_sets, judge_config, writer_pairs  # noqa: E402
from sentence_source_gain import sentence_gains  # noqa: E402
from unlisted_filler import WORDINGS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default",
                   help="a judge config with gptscore.unconditional (name or path)")
    p.add_argument("--baseline", default="news", help="the baseline source compared with none (gptscore.baseline_source)")
    p.add_argument("--articles", type=int, default=20, help="the first N articles of each set")
    p.add_argument("--max-source-words", type=int, default=400)
    p.add_argument("--min-information", type=float, default=0.2, help="the lift guard's threshold, for the shares")
    p.add_argument("--min-tokens", type=int, default=3, help="tokens holding a letter or digit a sentence needs")
    p.add_argument("--dtype", default=None, help="the judge's dtype (backend.dtype)")
    p.add_argument("--cache", default=None, help="judgment cache (SQLite)")
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $JUDGE_REWARD_DATA or ../shared/data)")
    p.add_argument("--sets", default="writers,summeval", help="which sets, comma-separated: writers, summeval")
    args = p.parse_args(argv)
    chosen = chosen_sets(p, args.sets, ("writers", "summeval"))

    from judge_reward.bias_audit.data import load_held_out_articles
    from judge_reward.cli_validate import load_rated
    from judge_reward.methods.base import Item
    from judge_reward.reward import Reward
    from judge_reward.scoreboard import probe_pairs

    rewards = {}
    for label, baseline in (("none", None), (args.baseline, args.baseline)):
        cfg = judge_config(args.config, args.dtype, args.cache)
        cfg.gptscore = {**cfg.gptscore, "unconditional": True, "baseline_source": baseline}
        rewards[label] = Reward.from_config(cfg)

    sets = {}
    if "writers" in chosen:
        writers = load_held_out_articles(args.data / "zhang2023" if args.data else None)[:args.articles]
        sets["writer summaries"] = writer_pairs(writers, args.max_source_words)
    if "summeval" in chosen:
        dataset, refs = load_rated("summeval", args.data)
        sets["SummEval highlights"] = probe_pairs(dataset, refs, args.articles, args.max_source_words)

    def quantiles(values) -> str:
        return " / ".join(f"{v:.2f}" for v in np.quantile(values, [0.0, 0.05, 0.1, 0.5]))

    for set_name, pairs in sets.items():
        texts = [(pair, None, pair.output.strip()) for pair in pairs]
        texts += [(pair, name, make(pair.output.strip(), pair.source)) for name, make in WORDINGS.items() for pair in pairs]
        gains, rewritten = {}, set()
        for label, reward in rewards.items():
            items = [Item(text, pair.source) for pair, _, text in texts]
            results = reward(items)
            gains[label] = [sentence_gains(r, it.output, args.min_tokens) for r, it in zip(results, items)]
            # the injection guard removed part of the text before the judge read it (a chat opener)
            rewritten |= {k for k, (r, it) in enumerate(zip(results, items))
                          if r.judged_output is not None and r.judged_output.strip() != it.output.strip()}
        print(f"\n## {set_name}, first {len(pairs)} articles: gain per sentence, nats per token "
              f"(baseline: none | {args.baseline})\n")
        print(f"| sentences | n | none: min / .05 / .10 / median | {args.baseline}: min / .05 / .10 / median "
              f"| share under {args.min_information}: none | {args.baseline} |\n|---|---|---|---|---|---|")
        for which, pick in (("the summaries' first", lambda found: found[:1]), ("their others", lambda found: found[1:])):
            per_label = {label: [g for k, (_, name, _) in enumerate(texts) if name is None for _, g in pick(gains[label][k])]
                         for label in rewards}
            none, other = per_label["none"], per_label[args.baseline]
            print(f"| {which} | {len(none)} | {quantiles(none)} | {quantiles(other)} | "
                  f"{np.mean(np.array(none) < args.min_information):.3f} | {np.mean(np.array(other) < args.min_information):.3f} |")
        print(f"\n| generic sentence added | none: median / max | {args.baseline}: median / max | texts the injection "
              "guard rewrote (left out) |\n|---|---|---|---|")
        for name in WORDINGS:
            # the added sentence: the first one of a text it opens, the last of one it closes
            at = 0 if name.startswith("before") else -1
            mine = [k for k, (_, n, _) in enumerate(texts) if n == name]
            row = {label: [gains[label][k][at][1] for k in mine if k not in rewritten and gains[label][k]]
                   for label in rewards}
            cells = [f"{np.median(v):.2f} / {max(v):.2f}" if v else "-" for v in row.values()]
            print(f"| {name} | " + " | ".join(cells) + f" | {sum(k in rewritten for k in mine)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
