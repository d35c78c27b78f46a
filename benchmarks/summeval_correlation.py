"""The embedded judge on SummEval: summary-level Spearman per aspect, beside GPTScore's paper numbers.

Scores the first ``--docs`` SummEval documents (16 summaries each) on all four aspects with each
method, then correlates with the expert ratings per document over its 16 summaries and averages
(G-Eval's summary-level procedure). The paper column is GPTScore's GPT2-medium with instruction.

    python benchmarks/summeval_correlation.py --docs 20 --methods gptscore,geval

Each method is scored through its config's reward (``judge_reward.reward.Reward``), so the table
also shows what the guards cost in agreement: ``judge`` correlates the judge's own score of each
aspect, ``guarded`` that score minus the reward's guard penalties (what a trainer's per-aspect
reward sees). ``--geval-layout paper`` scores G-Eval with the paper's prompt order instead, and
``--gptscore-layout source_first`` GPTScore with the aspect's instruction after the source.
``--save FILE`` writes every summary's judge scores per method and aspect (JSON), so that a guard
change can be re-measured from the texts without running the judge again.
"""

from __future__ import annotations

import argparse
import json
import time

from _common import summeval
from judge_reward import Item, Judge, JudgeConfig
from judge_reward.metaeval.correlation import sample_level
from judge_reward.prompts.geval import LAYOUTS
from judge_reward.prompts.gptscore import LAYOUTS as GPTSCORE_LAYOUTS
from judge_reward.reward import Reward

PAPER = {"coherence": 0.392, "consistency": 0.353, "fluency": 0.307, "relevance": 0.283}
CONFIGS = {"gptscore": "default", "geval": "geval_gemma"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--methods", default="gptscore,geval")
    parser.add_argument("--geval-layout", choices=LAYOUTS, default=None,
                        help="G-Eval prompt order (default: the config's)")
    parser.add_argument("--gptscore-layout", choices=GPTSCORE_LAYOUTS, default=None,
                        help="GPTScore prompt order (default: the config's)")
    parser.add_argument("--gptscore-config", default=CONFIGS["gptscore"],
                        help="the judge config for the gptscore method (default: default; e.g. gptscore, the same judge with penalty guards)")
    parser.add_argument("--save", default=None, help="write every summary's judge scores to this JSON file")
    args = parser.parse_args()
    docs = summeval(args.docs)
    rows = [r for doc in docs for r in doc]
    items = [Item(r["system_output"], r["source"]) for r in rows]
    groups = [r["doc_id"] for r in rows]
    table = {}
    saved: dict[str, list[dict]] = {}
    judge = None
    for method in args.methods.split(","):
        config = JudgeConfig.from_yaml(args.gptscore_config if method == "gptscore" else CONFIGS[method])
        if method == "geval" and args.geval_layout:
            config.geval["layout"] = args.geval_layout
        if method == "gptscore" and args.gptscore_layout:
            config.gptscore["layout"] = args.gptscore_layout
        judge = Judge(config, backend=judge.backend if judge else None)  # load the model once
        reward = Reward(judge)
        start = time.perf_counter()
        rewarded = reward(items)
        seconds = time.perf_counter() - start
        saved[method] = [{aspect: r.scores[aspect].value for aspect in PAPER if aspect in r.scores} for r in rewarded]
        human_of = {aspect: [row["scores"][aspect] for row in rows] for aspect in PAPER}
        for aspect in PAPER:
            judged = [r.scores[aspect].value if aspect in r.scores else None for r in rewarded]
            guarded = [None if r.components.get(f"aspect/{aspect}") is None else r.components[f"aspect/{aspect}"] - sum(
                c for k, c in r.components.items() if k.startswith("guard/")) for r in rewarded]
            table[(method, aspect)] = sample_level(judged, human_of[aspect], groups, "spearman")
            table[(method + "+guards", aspect)] = sample_level(guarded, human_of[aspect], groups, "spearman")
        penalised = sum(any(c > 0 for k, c in r.components.items() if k.startswith("guard/")) for r in rewarded)
        failures = sum(r.value is None for r in rewarded)
        print(f"{method}: {len(items)} summaries x 4 aspects in {seconds:.0f} s, {failures} failures, "
              f"{penalised} summaries penalised by a guard ({', '.join(reward.guards.enabled) or 'none on'})")
        if method == "geval":
            masses = [r.scores[a].details["mass"] for r in rewarded for a in PAPER if r.scores[a].value is not None]
            print(f"  G-Eval mean probability mass on the 1-5 scale: {sum(masses) / len(masses):.3f}")
    if args.save:
        rows_out = [{"doc_id": r["doc_id"], "system_id": r["system_id"], "source": r["source"],
                     "output": r["system_output"], "human": r["scores"],
                     "judge": {m: saved[m][i] for m in saved}} for i, r in enumerate(rows)]
        meta = {"docs": len(docs), "model": judge.backend.model_id, "geval_layout": args.geval_layout,
                "gptscore_layout": args.gptscore_layout}
        with open(args.save, "w") as f:
            json.dump({"meta": meta, "rows": rows_out}, f)
        print(f"saved {len(rows_out)} summaries' judge scores to {args.save}")
    methods = [m + suffix for m in args.methods.split(",") for suffix in ("", "+guards")]
    print(f"\nSummary-level Spearman, first {len(docs)} SummEval documents ({judge.backend.model_id})")
    print(f"{'aspect':<12}" + "".join(f"{m:>16}" for m in methods) + f"{'paper GPT2-med':>16}")
    for aspect, paper in PAPER.items():
        print(f"{aspect:<12}" + "".join(f"{table[(m, aspect)]:>16.3f}" for m in methods) + f"{paper:>16.3f}")


if __name__ == "__main__":
    main()
