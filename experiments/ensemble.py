"""An ensemble of GPTScore and G-Eval instead of (or beside) guards: measured, as issue 15 asks.

A likelihood judge rewards copying (a pasted lead is the likeliest text given its article); a
form-filling judge rewards text that imitates its form. Each fails where the other does not, so a
weighted sum might pass the probes without guards, and keep the likelihood judge's agreement with
people. TRL's ``reward_funcs`` with ``reward_weights`` is exactly such a sum, so this is what a user
would build. Two families of sums, each swept over the G-Eval weight ``w``:

* judges alone, no guard: GPTScore's mean log-probability per token given the source (the
  ``--gptscore`` config's judge, mean over the four aspects) + ``w`` x G-Eval's expected score on
  [0, 1] (the ``--geval`` config's judge, mean over the aspects), both reading the raw text;
* the shipped rewards: the ``--gptscore`` config's reward + ``w`` x the ``--geval`` config's reward.

For each point: summary-level Spearman against each aspect's expert ratings on the first ``--docs``
SummEval documents (16 system summaries each), and every probe family's wins over the first
``--probe-docs`` articles (cut to ``--max-source-words`` words; the human highlight is the real
summary), counted by the probe suite's own rule. Each text is judged once per config; every point
is arithmetic on those values.

    python experiments/ensemble.py --docs 20 --probe-docs 12    # ~25 min on 2 CPU cores (bf16)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common.py and the benchmark scripts this study reuses
from _common import data_dir, summeval  # noqa: E402
from probe_summeval import summeval_pairs, wins_per_family  # noqa: E402

from judge_reward.metaeval.correlation import sample_level  # noqa: E402
from judge_reward.methods.base import Item  # noqa: E402
from judge_reward.probes import FAMILIES, build_probes, other_items  # noqa: E402
from judge_reward.reward import Reward  # noqa: E402

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
WEIGHTS = (0.0, 1.0, 3.0, 10.0, 30.0, 100.0)


def judge_means(reward: Reward, items: list[Item]) -> list[float | None]:
    """The judge's own score of each raw text, mean over the reward's aspects (G-Eval on [0, 1])."""
    scored = reward.judge.score(items, aspects=reward.aspect_names, method=reward.method_name)
    out = []
    for scores in scored:
        values = [scores[a.name].value if scores.get(a.name) is not None else None for a in reward.aspects]
        if any(v is None for v in values):
            out.append(None)
            continue
        if reward.method_name == "geval":
            values = [a.scale.normalise(v) for a, v in zip(reward.aspects, values)]
        out.append(sum(values) / len(values))
    return out


def rewards(reward: Reward, items: list[Item]) -> list[float | None]:
    return [r.value for r in reward(items)]


def combine(a: list[float | None], b: list[float | None], w: float | None) -> list[float | None]:
    """``a + w * b``; ``w = None``: ``b`` alone."""
    return [None if x is None or y is None else (y if w is None else x + w * y) for x, y in zip(a, b)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gptscore", default="default", help="the likelihood judge's config (and its reward)")
    parser.add_argument("--geval", default="geval_gemma", help="the form-filling judge's config (and its reward)")
    parser.add_argument("--docs", type=int, default=20, help="SummEval documents for agreement (16 summaries each)")
    parser.add_argument("--probe-docs", type=int, default=12, help="SummEval articles for the probes")
    parser.add_argument("--max-source-words", type=int, default=400)
    parser.add_argument("--max-win-rate", type=float, default=0.1, help="the probe gate (families above it are listed)")
    parser.add_argument("--save", type=Path, default=None, help="write every text's four values as JSON")
    args = parser.parse_args()
    likelihood, form = Reward.from_config(args.gptscore), Reward.from_config(args.geval)
    for name, r, method in ((args.gptscore, likelihood, "gptscore"), (args.geval, form, "geval")):
        if r.method_name != method:
            raise SystemExit(f"error: {name}: method is {r.method_name!r}, expected {method!r}")

    rows = [r for doc in summeval(args.docs) for r in doc]
    items = [Item(r["system_output"], r["source"]) for r in rows]
    labels: list[tuple[int, str]] = [(-1, "system")] * len(items)
    pairs = summeval_pairs(data_dir(None, "summeval", "summeval.json"), args.probe_docs, "reference", args.max_source_words)
    for i, pair in enumerate(pairs):
        items.append(pair)
        labels.append((i, "real"))
        for probe in build_probes(pair, other_items(pairs, i), likelihood.aspects):
            items.append(Item(probe.output, pair.source))
            labels.append((i, probe.family))

    values, seconds = {}, {}
    for key, reward in (("gptscore", likelihood), ("geval", form)):
        start = time.perf_counter()
        values[f"{key}_judge"] = judge_means(reward, items)
        values[f"{key}_reward"] = rewards(reward, items)  # re-judges only the texts the injection guard rewrote
        seconds[key] = time.perf_counter() - start
        print(f"{key}: {len(items)} texts in {seconds[key]:.0f} s", flush=True)
    if args.save:
        args.save.write_text(json.dumps({"labels": labels, "values": values, "seconds": seconds}))

    n_sys = len(rows)
    groups = [r["doc_id"] for r in rows]
    human = {a: [r["scores"][a] for r in rows] for a in ASPECTS}
    n = len(pairs)

    def row(name: str, w: str, combined: list[float | None]) -> str:
        agree = " | ".join(f"{sample_level(combined[:n_sys], human[a], groups, 'spearman'):.3f}" for a in ASPECTS)
        won = wins_per_family(combined[n_sys:], labels[n_sys:], FAMILIES)
        over = [f"{f} {k}/{n}" for f, k in won.items() if k / n > args.max_win_rate]
        return f"| {name} | {w} | {agree} | {', '.join(over) or 'none'} |"

    print(f"\nensemble of {args.gptscore} (GPTScore) and {args.geval} (G-Eval); agreement: first {args.docs} SummEval "
          f"documents ({n_sys} summaries); probes: first {n} articles cut to {args.max_source_words} words, "
          f"{len(items) - n_sys - n} probe texts; judging {seconds['gptscore']:.0f} s + {seconds['geval']:.0f} s\n")
    print("| sum | G-Eval weight w | " + " | ".join(ASPECTS) + f" | families winning > {args.max_win_rate:.0%} |")
    print("|---|---|" + "---|" * (len(ASPECTS) + 1))
    for kind, label in (("judge", "GPTScore judge + w x G-Eval judge (no guards)"),
                        ("reward", f"{args.gptscore} reward + w x {args.geval} reward")):
        a, b = values[f"gptscore_{kind}"], values[f"geval_{kind}"]
        for w in WEIGHTS:
            print(row(label, f"{w:g}", combine(a, b, w)))
        print(row(label, "G-Eval alone", combine(a, b, None)))


if __name__ == "__main__":
    main()
