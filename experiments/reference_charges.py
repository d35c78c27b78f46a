"""What the guards charge human-written summaries, the guards that read the judge included.

``judge-reward validate`` runs the text guards on all of SummEval's 1,100 highlights, but judges
only the probed ones (20 by default), so a guard that reads the judge's tokens (``lift``, the
judge-asked ``ending``) is costed on those few. This script judges one highlight of each of many
articles (the ``--highlight``-th, the article cut to ``--max-source-words`` as ``validate`` probes)
with the config's reward and prints, per guard, the share charged, the mean charge, and the charged
highlights themselves.

    PYTHONPATH=. python experiments/reference_charges.py --config default --dtype float32 \\
        --cache judgments.sqlite --articles 100
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _common import cut_words, data_dir, judge_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="judge config (name or path)")
    p.add_argument("--data", default=None, help="the summeval folder (default: $JUDGE_REWARD_DATA/summeval)")
    p.add_argument("--articles", type=int, default=100, help="the first N articles")
    p.add_argument("--offset", type=int, default=0, help="skip this many articles first")
    p.add_argument("--highlight", type=int, default=0, help="which of each article's highlights (0: the first)")
    p.add_argument("--max-source-words", type=int, default=400)
    p.add_argument("--dtype", default=None, help="the judge's dtype (backend.dtype)")
    p.add_argument("--cache", default=None, help="judgment cache (SQLite)")
    p.add_argument("--setting", action="append", default=[], metavar="GUARD=JSON",
                   help='override a guard\'s fields, e.g. lift={"weight": 1.0} (repeatable)')
    args = p.parse_args(argv)

    from judge_reward.metaeval.datasets import load_references, load_summeval
    from judge_reward.methods.base import Item
    from judge_reward.reward import Reward
    from tqdm.auto import tqdm

    start = time.perf_counter()
    folder = data_dir(args.data, "summeval")
    sources: dict[str, str] = {}
    for rec in load_summeval(folder / "summeval.json").records:
        sources.setdefault(rec.group, rec.item.source)
    references = load_references(folder / "references.json")
    groups = [g for g in sources if len(references.get(g, ())) > args.highlight]
    groups = groups[args.offset:args.offset + args.articles]
    items = [Item(references[g][args.highlight], cut_words(sources[g], args.max_source_words), None, g)
             for g in groups]
    reward = Reward.from_config(judge_config(args.config, args.dtype, args.cache, args.setting))
    results = []
    with tqdm(total=len(items), desc="highlights", unit="text") as bar:
        for lo in range(0, len(items), 8):
            results += reward(items[lo:lo + 8])
            bar.update(len(items[lo:lo + 8]))
    scored = [(it, r) for it, r in zip(items, results) if r.value is not None]
    print(f"## {args.config}: highlight {args.highlight} of SummEval's articles {args.offset + 1}-"
          f"{args.offset + len(items)}, judged\n")
    print("| guard | charged | mean charge when charged |\n|---|---|---|")
    charged_texts = []
    for g in reward.guards.enabled:
        hits = [(it, r.components.get(f"guard/{g}") or 0.0) for it, r in scored]
        hits = [(it, c) for it, c in hits if c > 1e-12]
        mean = statistics.fmean(c for _, c in hits) if hits else 0.0
        print(f"| {g} | {len(hits)}/{len(scored)} ({len(hits) / max(len(scored), 1):.1%}) | {mean:.3f} |")
        charged_texts += [(g, c, it) for it, c in hits]
    failed = [r.reason for r in results if r.value is None]
    if failed:
        print(f"\n{len(failed)} highlights got no reward: {sorted(set(failed))}")
    if charged_texts:
        print("\nCharged highlights:\n")
        for g, c, it in charged_texts:
            print(f"- {g} {c:.2f} ({it.id}): {it.output!r}")
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
