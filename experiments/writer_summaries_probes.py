"""Held-out attacks on other people's summaries: the probe suite against Zhang et al.'s writer summaries.

Every guard of the shipped configs was chosen on SummEval: its highlights and its system outputs.
Zhang et al. (2023) had freelance writers summarise other news articles, in their own style; none
of their texts was read when a guard or a threshold was chosen. For each of the first ``--articles``
articles of ``zhang2023/writer_summaries.json`` (the article cut to ``--max-source-words``, as
``judge-reward validate`` probes):

* the probe suite, with the article's first writer summary as the real output (attacks gated, fair
  outputs reported apart, as on the scoreboard);
* every writer summary of the article scored with the same reward: the share each guard charges.
  A guard that charges these honest summaries reads SummEval's highlight style as the norm.

    PYTHONPATH=. python experiments/writer_summaries_probes.py --config default --dtype float32 \\
        --cache judgments.sqlite
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _common import cut_words, judge_config, writer_pairs  # noqa: E402


def _summeval_references(explicit: str | None) -> Path | None:
    """SummEval's references.json: ``explicit``, else the data folder's; None when there is none."""
    from judge_reward.data import DataNotFoundError, resolve_data_path

    try:
        return resolve_data_path(explicit, "summeval", "references.json", what="--summeval")
    except DataNotFoundError:
        if explicit:
            raise
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="judge config (name or path)")
    p.add_argument("--data", default=None, help="the zhang2023 folder (default: $JUDGE_REWARD_DATA/zhang2023)")
    p.add_argument("--articles", type=int, default=20, help="the first N articles of writer_summaries.json")
    p.add_argument("--max-source-words", type=int, default=400)
    p.add_argument("--max-win-rate", type=float, default=0.1)
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--dtype", default=None, help="the judge's dtype (backend.dtype)")
    p.add_argument("--cache", default=None, help="judgment cache (SQLite)")
    p.add_argument("--setting", action="append", default=[], metavar="GUARD=JSON",
                   help='override a guard\'s fields, e.g. grounding={"skip_function_words": true} (repeatable)')
    p.add_argument("--summeval", default=None, help="SummEval's references.json: also count the text guards' charges "
                                                    "on its 1,100 references (default: the data folder's, when present)")
    args = p.parse_args(argv)

    from judge_reward.bias_audit.data import load_held_out_articles
    from judge_reward.methods.base import Item
    from judge_reward.probes import run_probes
    from judge_reward.reward import Reward

    start = time.perf_counter()
    articles = load_held_out_articles(args.data)[:args.articles]
    reward = Reward.from_config(judge_config(args.config, args.dtype, args.cache, args.setting))
    pairs = writer_pairs(articles, args.max_source_words)
    report = run_probes(reward, pairs, n_boot=args.n_boot, task="summarization")
    print(f"## {args.config}: probes on {len(pairs)} articles of Zhang et al. (2023), the first writer summary "
          f"as the real output\n")
    print(report.to_markdown(args.max_win_rate, variants=False))

    summaries = [Item(s, cut_words(a.article, args.max_source_words)) for a in articles for s in a.human_summaries]
    results = reward(summaries)
    print(f"Guards on all {len(summaries)} writer summaries of these articles (share charged, mean charge):\n")
    print("| guard | charged | mean charge when charged |\n|---|---|---|")
    for g in reward.guards.enabled:
        charges = [r.components.get(f"guard/{g}") or 0.0 for r in results if r.value is not None]
        hit = [c for c in charges if c > 1e-12]
        print(f"| {g} | {len(hit)}/{len(charges)} ({len(hit) / max(len(charges), 1):.1%}) | "
              f"{(sum(hit) / len(hit)) if hit else 0.0:.3f} |")
    failed = [r.reason for r in results if r.value is None]
    if failed:
        print(f"\n{len(failed)} summaries got no reward: {sorted(set(failed))}")
    refs_file = _summeval_references(args.summeval)
    if refs_file is not None:
        from judge_reward.metaeval.datasets import load_references, load_summeval

        sources = {r.group: r.item.source for r in load_summeval(refs_file.parent / "summeval.json").records}
        highlights = [Item(t, sources[g]) for g, texts in load_references(refs_file).items() for t in texts]
        reports = reward.guard_reports(*reward.prepare(highlights))
        print(f"\nText guards on SummEval's {len(highlights)} references (share charged): " + ", ".join(
            f"{g} {sum(1 for r in reports if r and r.penalties.get(g, 0.0) > 1e-12) / len(reports):.1%}"
            for g in reward.guards.enabled if g != "ending" and g not in reward.guards.reading_unconditional)
              + " (the guards that read the judge are not counted: the references are not judged)")
    words = [len(s.output.split()) for s in summaries]
    print(f"\nwriter summaries: median {sorted(words)[len(words) // 2]} words (range {min(words)}-{max(words)}); "
          f"{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
