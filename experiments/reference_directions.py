"""GPTScore against a human reference instead of the source: measured, as issue 15 asks.

A likelihood judge that reads the article rewards copying it: the article's own sentences are the
likeliest text given the article. GPTScore's reference-based directions condition on a human
summary instead (``ref_hypo``: the output given the reference; ``hypo_ref``: the reference given the
output; ``avg_f``: their mean), so a pasted lead is only worth what it shares with that summary.
A trainer can use them where its data carries a reference (TRL passes dataset columns to the reward
functions; ``JudgeReward`` reads a ``reference`` column). Measured for each direction, the judge
alone and with the ``--config`` reward's text guards (every guard but ``copy``, whose job the
reference would take over), and the mean of the source direction and each reference direction:

* agreement: summary-level Spearman against each aspect's expert ratings on the first ``--docs``
  SummEval documents (16 system summaries each), every summary judged against the article's
  original highlight (what a trainer's data would carry);
* probes: the wins of the ``--families`` (default: the two that the text guards leave to the copy
  guard, the source or its lead copied and truncation; ``all`` for every family) over the first
  ``--probe-docs`` articles (cut to ``--max-source-words`` words), counted by the probe suite's own
  rule, in two arrangements, since
  the real summary and the judge's reference must be different texts: ``highlight`` (the real
  summary is the highlight, as in every other probe table; the judge's reference is the first
  crowd-written summary of SummEval's references file) and ``crowd`` (the real summary is that
  crowd-written summary; the judge's reference is the highlight, as in training).

Guards are functions of the texts, so a point's reward is its judge value minus the penalties the
reward charged; ``avg_f`` is the mean of the two directions' values, as the method computes it.

    python experiments/reference_directions.py --docs 20 --probe-docs 12    # ~15 min on 2 CPU cores (bf16)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common.py and the benchmark scripts this study reuses
from _common import data_dir, summeval  # noqa: E402
from probe_summeval import summeval_pairs, wins_per_family  # noqa: E402

from judge_reward import Judge, JudgeConfig  # noqa: E402
from judge_reward.metaeval.correlation import sample_level  # noqa: E402
from judge_reward.methods.base import Item  # noqa: E402
from judge_reward.probes import FAMILIES, build_probes, other_items  # noqa: E402
from judge_reward.reward import TOKEN_GUARDS, Reward, RewardConfig  # noqa: E402

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
DIRECTIONS = ("src_hypo", "ref_hypo", "hypo_ref")
ARRANGEMENTS = ("highlight", "crowd")


def reward_for(base: JudgeConfig, direction: str, backend) -> Reward:
    """``base``'s judge in ``direction``, rewarded with ``base``'s guards but ``copy``."""
    config = copy.deepcopy(base)
    config.gptscore = {**(config.gptscore or {}), "direction": direction, "unconditional": False}
    raw = copy.deepcopy(config.reward or {})
    guards = raw.setdefault("guards", {})
    guards["copy"] = {"enabled": False}
    for reads_token_logprobs in TOKEN_GUARDS:  # they read the source direction's tokens
        guards.pop(reads_token_logprobs, None)
    raw["normalise"] = "none"
    return Reward(Judge(config, backend=backend), RewardConfig.from_dict(raw))


def judge_and_penalty(reward: Reward, items: list[Item]) -> tuple[list[float | None], list[float | None]]:
    """Per item: the judge's weighted score over the reward's aspects (``normalise: none``: the
    reward before its guards), and what the guards charged, from the reward's own components."""
    judged, charged = [], []
    for result in reward(items):
        penalty = None if result.value is None else sum(
            v for k, v in result.components.items() if k.startswith("guard/"))
        judged.append(None if penalty is None else result.value + penalty)
        charged.append(penalty)
    return judged, charged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="gptscore", help="a GPTScore judge config whose text guards are used")
    parser.add_argument("--docs", type=int, default=20, help="SummEval documents for agreement (16 summaries each)")
    parser.add_argument("--probe-docs", type=int, default=12, help="SummEval articles for the probes")
    parser.add_argument("--max-source-words", type=int, default=400)
    parser.add_argument("--max-win-rate", type=float, default=0.1, help="the probe gate (families above it are listed)")
    parser.add_argument("--crowd-index", type=int, default=1,
                        help="which of the references file's summaries is the crowd-written one (0 is the highlight)")
    parser.add_argument("--families", default="copy_source,truncation",
                        help="comma-separated probe families, or 'all' (every family: about 9x the probe texts)")
    parser.add_argument("--save", default=None, help="write every text's judge value and penalty per direction as JSON")
    args = parser.parse_args()
    base = JudgeConfig.from_yaml(args.config)
    if base.method != "gptscore":
        raise SystemExit(f"error: {args.config}: method is {base.method!r}, expected 'gptscore'")
    references = json.loads(data_dir(None, "summeval", "references.json").read_text())
    rewards, backend = {}, None
    for direction in DIRECTIONS:
        rewards[direction] = reward_for(base, direction, backend)
        backend = rewards[direction].judge.backend  # load the model once
    aspects = rewards["src_hypo"].aspects
    families = list(FAMILIES) if args.families == "all" else [f.strip() for f in args.families.split(",")]

    rows = [r for doc in summeval(args.docs) for r in doc]
    items = [Item(r["system_output"], r["source"], r["reference"]) for r in rows]
    labels: list[tuple[str, int, str]] = [("system", -1, "system")] * len(items)
    pairs = summeval_pairs(data_dir(None, "summeval", "summeval.json"), args.probe_docs, "reference", args.max_source_words)
    for arrangement in ARRANGEMENTS:
        for i, pair in enumerate(pairs):
            doc_id = pair.id.split("/")[0]
            highlight, crowd = pair.output, references[doc_id][args.crowd_index]
            real, judge_reference = (highlight, crowd) if arrangement == "highlight" else (crowd, highlight)
            real_item = Item(real, pair.source, judge_reference)
            items.append(real_item)
            labels.append((arrangement, i, "real"))
            others = [Item(o.output if arrangement == "highlight" else references[o.id.split("/")[0]][args.crowd_index],
                           o.source) for o in other_items(pairs, i)]
            for probe in build_probes(real_item, others, aspects, families):
                items.append(Item(probe.output, pair.source, judge_reference))
                labels.append((arrangement, i, probe.family))

    judged, charged, seconds = {}, {}, {}
    for direction, reward in rewards.items():
        start = time.perf_counter()
        judged[direction], charged[direction] = judge_and_penalty(reward, items)
        seconds[direction] = time.perf_counter() - start
        print(f"{direction}: {len(items)} texts in {seconds[direction]:.0f} s", flush=True)
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"labels": labels, "judged": judged, "charged": charged, "seconds": seconds}, f)

    def mean_of(a, b):
        return [None if x is None or y is None else (x + y) / 2 for x, y in zip(a, b)]

    judged["avg_f"] = mean_of(judged["ref_hypo"], judged["hypo_ref"])
    points = {  # name -> the judge values it sums; the penalties are the same for every direction
        "source (src_hypo, GPTScore's default)": judged["src_hypo"],
        "reference: ref_hypo": judged["ref_hypo"],
        "reference: hypo_ref": judged["hypo_ref"],
        "reference: avg_f": judged["avg_f"],
        "mean of src_hypo and ref_hypo": mean_of(judged["src_hypo"], judged["ref_hypo"]),
        "mean of src_hypo and avg_f": mean_of(judged["src_hypo"], judged["avg_f"]),
    }
    penalty = charged["src_hypo"]

    n_sys = len(rows)
    groups = [r["doc_id"] for r in rows]
    human = {a: [r["scores"][a] for r in rows] for a in ASPECTS}
    n = len(pairs)

    def row(name: str, guarded: bool, values: list[float | None]) -> str:
        if guarded:
            values = [None if v is None or p is None else v - p for v, p in zip(values, penalty)]
        agree = " | ".join(f"{sample_level(values[:n_sys], human[a], groups, 'spearman'):.3f}" for a in ASPECTS)
        cells = []
        for arrangement in ARRANGEMENTS:
            keep = [k for k in range(n_sys, len(items)) if labels[k][0] == arrangement]
            won = wins_per_family([values[k] for k in keep], [labels[k][1:] for k in keep], families)
            # a few families: every count; all of them: those over the gate
            shown = [f"{f} {w}/{n}" for f, w in won.items() if len(families) <= 3 or w / n > args.max_win_rate]
            cells.append(", ".join(shown) or "none")
        return f"| {name} | {'text guards' if guarded else 'none'} | {agree} | " + " | ".join(cells) + " |"

    print(f"\nGPTScore directions ({args.config}'s judge and text guards, copy guard off); agreement: first {args.docs} "
          f"SummEval documents ({n_sys} summaries, each against its highlight); probes: first {n} articles cut to "
          f"{args.max_source_words} words, {len(items) - n_sys - 2 * n} probe texts in two arrangements; judging "
          + ", ".join(f"{d} {s:.0f} s" for d, s in seconds.items()) + "\n")
    print("| judge | guards | " + " | ".join(ASPECTS) + " | probe wins, real = highlight, judge's reference = a crowd summary"
          " | real = a crowd summary, reference = highlight |")
    print("|---|---|" + "---|" * (len(ASPECTS) + 2))
    for guarded in (False, True):
        for name, values in points.items():
            print(row(name, guarded, values))


if __name__ == "__main__":
    main()
