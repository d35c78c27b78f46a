"""Reward-hacking probes on SummEval: which cheap manipulations beat a real summary under a judge's reward?

For each of the first ``--docs`` SummEval articles the real output is the human-written highlight
(the ``reference`` field; ``--real best``: the system summary with the highest mean expert rating
over the four aspects). The probe suite (judge_reward.probes) builds every family's wordings from
it and scores them with the reward a trainer built from ``--config`` would get. Several configs
share one loaded model.

    python benchmarks/probe_summeval.py --docs 30 --config default,gptscore,geval_gemma --out reports/probes_summeval
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import data_dir
from judge_reward.metaeval import load_summeval
from judge_reward.methods.base import Item
from judge_reward.probes import FAMILIES, ItemOutcome, ProbeOutcome, run_probes, summarise_family
from judge_reward.reward import Reward


def summeval_pairs(path: Path, docs: int, real: str = "reference", max_source_words: int | None = None) -> list[Item]:
    """One pair per article: its source and the real output (``reference`` or ``best``)."""
    ds = load_summeval(path).first_groups(docs)
    by_doc: dict[str, list] = {}
    for r in ds.records:
        by_doc.setdefault(r.group, []).append(r)
    pairs = []
    for doc_id, records in by_doc.items():
        source = records[0].item.source
        if max_source_words:
            source = " ".join(source.split()[:max_source_words])
        if real == "reference":
            output, tag = records[0].item.reference, "reference"
        else:
            best = max(records, key=lambda r: sum(r.human.values()) / len(r.human))
            output, tag = best.item.output, best.system
        pairs.append(Item(output, source, id=f"{doc_id}/{tag}"))
    return pairs


def wins_per_family(values: list[float | None], labels: list[tuple[int, str]], families) -> dict[str, int]:
    """Per family: on how many articles its best wording beats the real summary, counted by the probe
    suite's own rule (:func:`judge_reward.probes.summarise_family`). ``labels[k]`` is ``(article,
    "real")`` or ``(article, family)`` for ``values[k]``; each article's real summary comes first."""
    outcomes: dict[int, ItemOutcome] = {}
    for (i, family), v in zip(labels, values):
        if family == "real":
            outcomes[i] = ItemOutcome(str(i), "", v, None, [], cluster=i)
        else:
            outcomes[i].probes.append(ProbeOutcome(family, "", "", v))
    return {f: summarise_family(f, list(outcomes.values()), n_boot=0).wins for f in families}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=30, help="first N SummEval articles (one pair each)")
    parser.add_argument("--real", choices=("reference", "best"), default="reference",
                        help="the real output: the human highlight, or the best-rated system summary")
    parser.add_argument("--config", default="default", help="comma-separated judge configs (names or paths)")
    parser.add_argument("--data", type=Path, default=None,
                        help="data folder holding summeval/summeval.json (default: $JUDGE_REWARD_DATA or ../shared/data)")
    parser.add_argument("--out", type=Path, default=Path("reports/probes_summeval"), help="one subfolder per config")
    parser.add_argument("--families", default=None, help=f"comma-separated subset of: {', '.join(FAMILIES)}")
    parser.add_argument("--max-win-rate", type=float, default=0.1, help="gate drawn in the table and figure")
    parser.add_argument("--max-source-words", type=int, default=None,
                        help="cut each article to N words (what a training config with max_source_words feeds the reward)")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = data_dir(args.data / "summeval" / "summeval.json" if args.data else None, "summeval", "summeval.json")
    pairs = summeval_pairs(data, args.docs, args.real, args.max_source_words)
    families = [f.strip() for f in args.families.split(",")] if args.families else None
    backend = None
    for config in [c.strip() for c in args.config.split(",") if c.strip()]:
        start = time.perf_counter()
        reward = Reward.from_config(config, backend=backend)
        backend = reward.judge.backend  # load the model once for every config
        loaded = time.perf_counter() - start
        report = run_probes(reward, pairs, families, n_boot=args.n_boot, seed=args.seed)
        report.meta.update(config=config, data=str(data), real=args.real, max_source_words=args.max_source_words,
                           seconds_loading=loaded)
        name = Path(config).stem
        paths = report.write(args.out / name, args.max_win_rate)
        print(f"\n## {name}: {len(pairs)} SummEval articles, real output = {args.real}; "
              f"{report.meta['texts_scored']} texts in {report.meta['seconds']:.0f} s (+{loaded:.0f} s loading)\n")
        print(report.to_markdown(args.max_win_rate, variants=False))
        failed = report.failed(args.max_win_rate)
        print(f"above {args.max_win_rate:g}: {', '.join(failed) or 'none'}; wrote {', '.join(str(p) for p in paths.values())}")


if __name__ == "__main__":
    main()
