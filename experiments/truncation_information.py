"""Truncation against an information floor: can the information the output gives about its source,
summed over its first B tokens, tell a highlight from its first half when the judge's mean
log-probability cannot?

The judge's mean log-probability per token is indifferent to length, so the highlight cut short
(the ``truncation`` probe family: its first half or third of words, its last sentence cut) beats
the whole highlight on 12-13 of the first 20 articles. The information term (pointwise mutual
information of the output's tokens with the source, summed over the first ``B`` tokens and divided
by ``B``: ``guards.source_information``) grows with what is said, so a floor on it would charge a
text that says too little. For each budget ``B``: the information of SummEval's 1,600 system
outputs (its percentiles), of the 20 probed highlights, and for floors at the outputs' 1st, 2nd and
5th percentiles (weights 1 and 4) the share of outputs and highlights charged and how many
articles' best truncation still beats its highlight under the judge's mean minus the charge.

Reads the judge's token log-probabilities with and without the source from a judgment cache filled
by the ``information`` config's scoreboard (``gptscore.unconditional: true``); no model call:

    python experiments/truncation_information.py --cache .cache/scoreboard/information_bf16.sqlite --dtype bfloat16
"""

from __future__ import annotations

import argparse


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", required=True, help="judgment cache of the information config's scoreboard")
    p.add_argument("--dtype", default="bfloat16", help="the dtype the cache was filled in")
    p.add_argument("--docs", type=int, default=20, help="probed articles (the scoreboard's first N)")
    p.add_argument("--budgets", type=int, nargs="+", default=[32, 48, 64, 96, 128])
    p.add_argument("--data", default=None)
    args = p.parse_args()

    import numpy as np

    from judge_reward.cli_validate import load_rated
    from judge_reward.judge import Judge, JudgeConfig
    from judge_reward.methods.base import Item
    from judge_reward.probes import beats, build_probes, other_items
    from judge_reward.scoreboard import probe_pairs

    cfg = JudgeConfig.load("information")
    cfg.backend = {**cfg.backend, "dtype": args.dtype}
    cfg.cache = {"path": args.cache, "replay_only": True}
    judge = Judge(cfg)
    aspects = judge.aspect_names
    data, refs = load_rated("summeval", args.data)

    def token_gains(items):
        """Per item: per aspect (conditional, unconditional) token log-probabilities; None if not cached."""
        out = []
        for r in judge.score(items, aspects):
            if any(r[a].value is None for a in aspects):
                out.append(None)
                continue
            out.append([(np.array(r[a].tokens.with_source), np.array(r[a].tokens.without_source))
                        for a in aspects])
        return out

    def judge_mean(t):
        return float(np.mean([c.mean() for c, _ in t]))

    def information(t, budget):
        return float(np.mean([(c - u)[:budget].sum() / budget for c, u in t]))

    outputs = [t for t in token_gains([r.item for r in data.records]) if t is not None]
    pairs = probe_pairs(data, refs, args.docs, 400)
    probed = []
    for k, pair in enumerate(pairs):
        cuts = build_probes(pair, other_items(pairs, k), judge.aspects, ["truncation"])
        scored = token_gains([pair] + [Item(c.output, pair.source, None, pair.id) for c in cuts])
        if scored[0] is not None and any(t is not None for t in scored[1:]):
            probed.append((scored[0], [t for t in scored[1:] if t is not None]))
    print(f"{len(outputs)} system outputs, {len(probed)} highlights with their truncations (from the cache)")
    wins = sum(beats(max(judge_mean(t) for t in cuts), judge_mean(h)) for h, cuts in probed)
    print(f"judge alone: truncation beats the highlight on {wins}/{len(probed)}")
    print("| B | outputs' information p1 / p5 / p50 | highlights' min / median | floor (outputs' pct) | weight | "
          "outputs charged | highlights charged | truncation wins |")
    print("|---|---|---|---|---|---|---|---|")
    for budget in args.budgets:
        mine = np.array([information(t, budget) for t in outputs])
        theirs = np.array([information(h, budget) for h, _ in probed])
        for q in (1, 2, 5):
            floor = float(np.percentile(mine, q))
            for weight in (1.0, 4.0):
                def reward(t):
                    return judge_mean(t) - weight * max(0.0, floor - information(t, budget))
                won = sum(beats(max(reward(t) for t in cuts), reward(h)) for h, cuts in probed)
                p1, p5, p50 = np.percentile(mine, [1, 5, 50])
                print(f"| {budget} | {p1:.2f} / {p5:.2f} / {p50:.2f} | {theirs.min():.2f} / {np.median(theirs):.2f} | "
                      f"{floor:.2f} (p{q}) | {weight:g} | {np.mean(mine < floor):.3f} | {np.mean(theirs < floor):.2f} | "
                      f"{won}/{len(probed)} |")


if __name__ == "__main__":
    main()
