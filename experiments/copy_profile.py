"""How much SummEval's summaries copy from their articles, and how a copy guard sees them (no model).

For every SummEval document: the share of words inside verbatim article fragments of at least
``k`` words (``reward.guards.copy``'s statistic) for the human highlight and each of the 16 system
summaries. Prints, per ``k``, the quantiles of highlights and of system summaries and the share of
each at or above a few thresholds, then each system's mean share beside its mean expert ratings.
It shows where a copy charge can separate a pasted lead from a human summary without also
re-ranking SummEval's systems (docs/rewards.md, "A saturating copy charge").

    python experiments/copy_profile.py                  # all 100 documents, seconds
    python experiments/copy_profile.py --k 4 8 20 --by-system 8
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common.py and the benchmark scripts this study reuses
from _common import summeval  # noqa: E402

from judge_reward.guards import long_copy_share, word_positions, words  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None, help="summeval.json (default: ../shared/data/summeval/summeval.json)")
    parser.add_argument("--k", type=int, nargs="+", default=[4, 6, 8, 12, 20], help="fragment lengths (words)")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.2, 0.3, 0.4, 0.5])
    parser.add_argument("--by-system", type=int, default=8, help="k for the per-system table (0: none)")
    args = parser.parse_args()
    docs = summeval(data=args.data)
    # each text's words once; only the fragment length changes between the tables
    tokenised = []
    for doc in docs:
        source = words(doc[0]["source"])
        tokenised.append((source, word_positions(source), words(doc[0]["reference"]),
                          [words(r["system_output"]) for r in doc]))

    shares: dict[int, dict] = {}
    for k in sorted(set(args.k) | ({args.by_system} if args.by_system else set())):
        highlight, system, above = [], defaultdict(list), []
        for doc, (source, index, reference, outputs) in zip(docs, tokenised):
            h = long_copy_share(reference, source, k, index)
            highlight.append(h)
            mine = [long_copy_share(out, source, k, index) for out in outputs]
            for r, s in zip(doc, mine):
                system[r["system_id"]].append((s, r["scores"]))
            above.append(sum(s > h for s in mine))
        shares[k] = {"highlight": np.array(highlight), "system": system, "above": np.array(above)}

    print(f"## Share of words in verbatim article fragments of >= k words ({len(docs)} SummEval documents, "
          f"{sum(len(d) for d in docs)} system summaries)\n")
    head = " | ".join(f">= {t:g}" for t in args.thresholds)
    print(f"| k | highlights: median, 90th pct | {head} (highlights) | systems: 10th pct, median | {head} (systems) "
          "| systems copying more than the highlight, per document |")
    print("|---|---|" + "---|" * len(args.thresholds) + "---|" + "---|" * len(args.thresholds) + "---|")
    for k in args.k:
        h = shares[k]["highlight"]
        s = np.array([v for vals in shares[k]["system"].values() for v, _ in vals])
        hs = " | ".join(f"{np.mean(h >= t):.2f}" for t in args.thresholds)
        ss = " | ".join(f"{np.mean(s >= t):.2f}" for t in args.thresholds)
        print(f"| {k} | {np.median(h):.2f}, {np.quantile(h, .9):.2f} | {hs} | {np.quantile(s, .1):.2f}, "
              f"{np.median(s):.2f} | {ss} | {np.mean(shares[k]['above']):.1f} of 16 |")

    if args.by_system:
        k = args.by_system
        print(f"\n## Per system, k = {k}: mean share, share of summaries under 0.4, mean expert ratings\n")
        print("| system | mean share | under 0.4 | coherence | consistency | fluency | relevance |")
        print("|---|---|---|---|---|---|---|")
        table = shares[k]["system"]
        for sid in sorted(table, key=lambda s: np.mean([v for v, _ in table[s]])):
            vals = table[sid]
            share = np.array([v for v, _ in vals])
            rated = {a: np.mean([sc[a] for _, sc in vals]) for a in ("coherence", "consistency", "fluency", "relevance")}
            print(f"| {sid} | {share.mean():.2f} | {np.mean(share < 0.4):.2f} | {rated['coherence']:.2f} | "
                  f"{rated['consistency']:.2f} | {rated['fluency']:.2f} | {rated['relevance']:.2f} |")


if __name__ == "__main__":
    main()
