"""The embedded judge on SummEval: summary-level Spearman per aspect, beside GPTScore's paper numbers.

Scores the first ``--docs`` SummEval documents (16 summaries each) on all four aspects with each
method, then correlates with the expert ratings per document over its 16 summaries and averages
(G-Eval's summary-level procedure). The paper column is GPTScore's GPT2-medium with instruction.

    python benchmarks/summeval_correlation.py --docs 20 --methods gptscore,geval
"""

from __future__ import annotations

import argparse
import time

from _common import summeval
from judge_reward import Item, Judge, JudgeConfig
from judge_reward.metaeval.correlation import sample_level

PAPER = {"coherence": 0.392, "consistency": 0.353, "fluency": 0.307, "relevance": 0.283}
CONFIGS = {"gptscore": "default", "geval": "geval_gemma"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--methods", default="gptscore,geval")
    args = parser.parse_args()
    docs = summeval(args.docs)
    rows = [r for doc in docs for r in doc]
    items = [Item(r["system_output"], r["source"]) for r in rows]
    groups = [r["doc_id"] for r in rows]
    table = {}
    judge = None
    for method in args.methods.split(","):
        config = JudgeConfig.from_yaml(CONFIGS[method])
        judge = Judge(config, backend=judge.backend if judge else None)  # load the model once
        start = time.perf_counter()
        results = judge.score(items)
        seconds = time.perf_counter() - start
        for aspect in PAPER:
            metric = [r[aspect].value for r in results]
            human = [row["scores"][aspect] for row in rows]
            table[(method, aspect)] = sample_level(metric, human, groups, "spearman")
        failures = sum(r[a].value is None for r in results for a in PAPER)
        print(f"{method}: {len(items)} summaries x 4 aspects in {seconds:.0f} s, {failures} failures")
        if method == "geval":
            masses = [r[a].details["mass"] for r in results for a in PAPER if r[a].value is not None]
            print(f"  G-Eval mean probability mass on the 1-5 scale: {sum(masses) / len(masses):.3f}")
    methods = args.methods.split(",")
    print(f"\nSummary-level Spearman, first {len(docs)} SummEval documents ({judge.backend.model_id})")
    print(f"{'aspect':<12}" + "".join(f"{m:>10}" for m in methods) + f"{'paper GPT2-med':>16}")
    for aspect, paper in PAPER.items():
        print(f"{aspect:<12}" + "".join(f"{table[(m, aspect)]:>10.3f}" for m in methods) + f"{paper:>16.3f}")


if __name__ == "__main__":
    main()
