"""Why does a generic sentence that names the article's main name still beat a real summary?

Under ``default`` the held-out wordings of ``experiments/unlisted_filler.py`` that name the
article's most frequent name ("There has been a lot of talk about Burns recently.") win on a few of
the first 20 articles of both sets (writers held out, SummEval's highlights). This script judges the
real summary and those six wordings, then

* splits each win by where its margin comes from: the judge's mean (``term/judge``), the real
  summary's own ``lift`` charge that the added sentence takes away, or a tie that the probes'
  rounding tolerance still counts as a win (a margin under ``--tie`` nats per token);
* replays the ``lift`` guard with other rules for "says nothing about the source" from the same
  token readings (the median token's gain, a mean with the most-gaining tokens left out): a name's
  tokens gain several nats from the article, the rest of such a sentence about none, so its mean
  gain is over ``min_information`` and the guard reads it as about the source.

    JUDGE_REWARD_DATA=../shared/data PYTHONPATH=. python experiments/naming_openers.py \\
        --dtype float32 --cache judgments.sqlite     # ~15 min the first time on 2 cores
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "experiments"))

from _common import judge_config, writer_pairs  # noqa: E402
from unlisted_filler import READINGS_AFTER, READINGS_BEFORE, TOPICAL_AFTER, TOPICAL_BEFORE, _added  # noqa: E402

NAMING = {
    "after: will stay in the news": _added(TOPICAL_AFTER[0], True),
    "after: keen to see what comes next": _added(TOPICAL_AFTER[1], True),
    "before: the latest news about": _added(TOPICAL_BEFORE[0], False),
    "before: a lot of talk about": _added(TOPICAL_BEFORE[1], False),
    "after: all eyes on": _added(READINGS_AFTER[2], True),
    "before: in the headlines again": _added(READINGS_BEFORE[2], False),
}


def _trimmed(gains, share: float) -> float:
    """The mean of ``gains`` without the ``share`` that gain the most."""
    g = sorted(gains)
    keep = max(1, len(g) - int(round(len(g) * share)))
    return float(np.mean(g[:keep]))


RULES = {
    "mean < .2 (shipped)": lambda g, m: np.mean(g) < m,
    "mean < .2 or median < .05": lambda g, m: np.mean(g) < m or np.median(g) < 0.05,
    "mean < .2 or median < .1": lambda g, m: np.mean(g) < m or np.median(g) < 0.1,
    "mean < .2 or median < .2": lambda g, m: np.mean(g) < m or np.median(g) < 0.2,
    "mean without the top 25% < .2": lambda g, m: _trimmed(g, 0.25) < m,
    "mean without the top 34% < .2": lambda g, m: _trimmed(g, 0.34) < m,
}


def lift_under(cond, uncond, sentence_of_token, idle_rule, min_information: float) -> float:
    """:func:`judge_reward.guards.sentence_lift` with ``idle_rule(gains, min_information)`` deciding
    which sentences say nothing about the source."""
    from judge_reward.guards import sentence_lift

    tokens: dict[int, list[int]] = {}
    for k, s in enumerate(sentence_of_token):
        if s >= 0:
            tokens.setdefault(s, []).append(k)
    idle = {s for s, at in tokens.items() if idle_rule([cond[k] - uncond[k] for k in at], min_information)}
    # sentence_lift's own rule (mean gain < threshold) reads these as idle: give idle sentences a gain
    # of -inf and the others +inf, so that the rest of the computation is the shipped one
    marked = [(-np.inf if s in idle else np.inf) if s >= 0 else 0.0 for s in sentence_of_token]
    return sentence_lift(cond, [c - m for c, m in zip(cond, marked)], sentence_of_token, 0.0)[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="judge config with the lift guard (name or path)")
    p.add_argument("--articles", type=int, default=20, help="the first N articles of each set")
    p.add_argument("--max-source-words", type=int, default=400)
    p.add_argument("--tie", type=float, default=0.03, help="a margin under this (nats per token) is counted as a tie")
    p.add_argument("--dtype", default=None, help="the judge's dtype (backend.dtype)")
    p.add_argument("--cache", default=None, help="judgment cache (SQLite)")
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $JUDGE_REWARD_DATA or ../shared/data)")
    args = p.parse_args(argv)

    from judge_reward.bias_audit.data import load_held_out_articles
    from judge_reward.cli_validate import load_rated
    from judge_reward.guards import token_span_index
    from judge_reward.methods.base import Item
    from judge_reward.probes import beats
    from judge_reward.reward import Reward
    from judge_reward.scoreboard import probe_pairs
    from judge_reward.sentences import sentence_spans

    reward = Reward.from_config(judge_config(args.config, args.dtype, args.cache))
    lift = reward.guards.lift
    if not lift.enabled:
        sys.exit(f"error: --config {args.config}: reward.guards.lift is off; this study replays it")
    dataset, refs = load_rated("summeval", args.data)
    sets = {"SummEval highlights": probe_pairs(dataset, refs, args.articles, args.max_source_words),
            "writer summaries (held out)": writer_pairs(
                load_held_out_articles(args.data / "zhang2023" if args.data else None)[:args.articles], args.max_source_words)}
    table = {}
    for label, pairs in sets.items():
        texts = [[pair.output.strip(), *(make(pair.output.strip(), pair.source) for make in NAMING.values())] for pair in pairs]
        results = reward([Item(t, pair.source) for pair, row in zip(pairs, texts) for t in row])
        width = 1 + len(NAMING)
        replayed: dict[str, list[list[float | None]]] = {rule: [] for rule in RULES}
        print(f"\n## {label}: wins under {args.config}, by where the margin comes from")
        print("| article | wording | margin | the judge's mean | the real output's lift charge taken away | kind |")
        print("|---|---|---|---|---|---|")
        for k, pair in enumerate(pairs):
            row = results[k * width:(k + 1) * width]
            real = row[0]
            for name, attack in zip(NAMING, row[1:]):
                if real.value is None or attack.value is None or not beats(attack.value, real.value):
                    continue
                margin = attack.value - real.value
                judge = attack.components["term/judge"] - real.components["term/judge"]
                undone = real.components.get("guard/lift", 0.0) - attack.components.get("guard/lift", 0.0)
                kind = "tie" if margin < args.tie else ("lift charge undone" if undone > judge else "judge")
                print(f"| {k + 1} | {name} | {margin:+.3f} | {judge:+.3f} | {undone:+.3f} | {kind} |")
            # each text's sentence of every token, read once for all the rules
            sentence_of = [token_span_index(next(iter(res.scores.values())).tokens.texts,
                                            sentence_spans(" " + (res.judged_output or text).strip(), reward.guards.language))
                           if res.value is not None and res.scores else None for text, res in zip(texts[k], row)]
            for rule, idle_rule in RULES.items():
                values, charges = [], []
                for res, where in zip(row, sentence_of):
                    if where is None:
                        values.append(None)
                        charges.append(None)
                        continue
                    lifts = {a: lift_under(s.tokens.with_source, s.tokens.without_source, where, idle_rule, lift.min_information)
                             for a, s in res.scores.items()}
                    mass = sum(reward.weights[a] for a in lifts)
                    charges.append(lift.weight * sum(reward.weights[a] * v for a, v in lifts.items()) / mass)
                    values.append(res.value + res.components.get("guard/lift", 0.0) - charges[-1])
                replayed[rule].append((values, charges[0]))
        table[label] = replayed
    print("\n## The lift guard's rule for a sentence that says nothing, replayed")
    print("| rule | " + " | ".join(f"{label}: real outputs charged; articles where some wording wins" for label in table) + " |")
    print("|---|" + "---|" * len(table))
    for rule in RULES:
        cells = []
        for replayed in table.values():
            rows = replayed[rule]
            charged = sum(c is not None and c > 1e-9 for _, c in rows)
            won = sum(any(v is not None and vals[0] is not None and beats(v, vals[0]) for v in vals[1:]) for vals, _ in rows)
            cells.append(f"{charged}; {won} of {len(rows)}")
        print(f"| {rule} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
