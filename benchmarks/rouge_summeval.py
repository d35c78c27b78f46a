"""Reproduce the published ROUGE-1/2/L correlations with human judgments on SummEval.

    python benchmarks/rouge_summeval.py --data ../shared/data/summeval

Prints our number beside the paper's for every published cell (G-Eval Table 1 summary-level
Spearman/Kendall; Wang et al. 2023 Table 1 summary-level Pearson and Table 6 dataset-level),
the difference, and whether it is within the tolerance. Exits 1 if any cell is not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from _common import data_dir
from judge_reward.metaeval.datasets import load_summeval
from judge_reward.metaeval.published import compare_to_published
from judge_reward.metaeval.report import MetaEvalConfig, evaluate
from judge_reward.metaeval.rouge import RougeConfig, rouge_scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="folder with summeval.json and references.json (default: summeval/ in the data folder)")  # fmt: skip
    parser.add_argument("--tolerance", type=float, default=0.003)
    parser.add_argument("--bootstrap", type=int, default=0, help="bootstrap resamples for CIs in --out (0: none)")
    parser.add_argument("--out", type=Path, help="write the full report as JSON")
    args = parser.parse_args(argv)

    console = Console(width=max(Console().width, 110))  # keep the table unwrapped when piped
    folder = data_dir(args.data, "summeval")
    dataset = load_summeval(folder / "summeval.json", folder / "references.json")
    start = time.perf_counter()
    metrics = rouge_scores([it.output for it in dataset.items], dataset.references, RougeConfig())
    rouge_seconds = time.perf_counter() - start
    start = time.perf_counter()
    report = evaluate(
        metrics, {a: dataset.human(a) for a in dataset.aspects}, dataset.groups, dataset.systems,
        MetaEvalConfig(n_bootstrap=args.bootstrap, compare=False), dataset="summeval",
    )  # fmt: skip
    corr_seconds = time.perf_counter() - start

    rows = compare_to_published(report)
    table = Table(title=f"ROUGE vs human on SummEval: ours vs published (tolerance {args.tolerance})")
    for col in ("source", "metric", "aspect", "level", "method", "ours", "paper", "diff", "ok"):
        table.add_column(col, justify="right" if col in ("ours", "paper", "diff") else "left")
    bad = 0
    for r in rows:
        ok = abs(r["diff"]) <= args.tolerance + 1e-9  # the papers print three decimals
        bad += not ok
        table.add_row(r["source"], r["metric"], r["aspect"], r["level"], r["method"],
                      f"{r['ours']:.3f}", f"{r['paper']:.3f}", f"{r['diff']:+.3f}", "yes" if ok else "[red]NO[/red]")  # fmt: skip
    console.print(table)
    worst = max(rows, key=lambda r: abs(r["diff"]))
    console.print(
        f"{len(rows) - bad}/{len(rows)} cells within {args.tolerance}; largest |diff| {abs(worst['diff']):.4f} "
        f"({worst['metric']} {worst['aspect']} {worst['level']} {worst['method']}). "
        f"ROUGE over {len(dataset)} summaries x 11 references: {rouge_seconds:.1f}s; correlations: {corr_seconds:.1f}s"
    )
    if args.out:
        report.meta.update({"published": rows, "seconds": {"rouge": rouge_seconds, "correlations": corr_seconds}})
        report.save_json(args.out)
        console.print(f"wrote {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
