"""Truncation against a coverage term: does adding what the output says about its source, summed
over a budget, to `default`'s reward make a cut highlight lose to the whole one, at what agreement?

The judge's mean log-probability per token does not grow with what is said, so a highlight cut to a
finished-looking shorter sentence still beats the whole highlight (truncation .15 on the first 20
articles; worded afresh, .23 on held-out ones). A floor on the information was tried and fails
(docs/research/truncation_information.md): the highlights say less about their articles than the
extractive system outputs, so any floor charges them first. This tries a linear term instead, which
compares an output only with its own shorter versions:

    reward' = reward_default + weight * coverage,
    coverage = mean over aspects of (1 / B) * sum over the first min(n, B) tokens of
               (log p(t_k | source, ...) - log p(t_k | no source, ...))

(copied tokens count: copying is fair here; the length guard charges past half the source.)
Reports, per (B, weight): summary-level Spearman and selection gain on SummEval's 1,600 outputs,
the truncation wins of the probe suite (first 20 / 20-60) and of the unlisted wordings (first 20 /
20-60 / 60-100), and the other probe families on the first 20.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python experiments/coverage_term.py --dtype float32 --cache judgments.sqlite
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).parent))

from _common import judge_config  # noqa: E402

SLICES = ((0, 20, "first 20"), (20, 60, "20-60"), (60, 100, "60-100"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default=None)
    p.add_argument("--cache", default=None)
    p.add_argument("--docs", type=int, default=100)
    p.add_argument("--budgets", type=int, nargs="+", default=[64, 128, 256])
    p.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.05, 0.1, 0.2, 0.3, 0.5])
    p.add_argument("--families", action="store_true", help="also every other probe family on the first 20")
    p.add_argument("--data", type=Path, default=None)
    args = p.parse_args(argv)

    import numpy as np
    from tqdm.auto import tqdm
    from unlisted_truncations import WORDINGS

    from judge_reward.cli_validate import load_rated
    from judge_reward.judge import Judge
    from judge_reward.methods.base import Item
    from judge_reward.probes import FAMILIES, beats, build_probes, is_fair, other_items
    from judge_reward.reward import Reward
    from judge_reward.scoreboard import _agreement, probe_pairs, selection

    reward = Reward.from_config(judge_config("default", args.dtype, args.cache))
    info_judge = Judge(judge_config("information", args.dtype, args.cache))
    aspects = info_judge.aspect_names
    dataset, refs = load_rated("summeval", args.data)
    pairs = probe_pairs(dataset, refs, args.docs, 400)

    def gains(items):
        """Per item the per-aspect arrays of (with source - without source) token log-probabilities."""
        out = []
        for lo in range(0, len(items), 64):
            for r in info_judge.score(items[lo:lo + 64], aspects):
                out.append(None if any(r[a].value is None for a in aspects) else
                           [np.array(r[a].tokens.with_source) - np.array(r[a].tokens.without_source) for a in aspects])
        return out

    def coverage(g, budget):
        return None if g is None else float(np.mean([x[:budget].sum() / budget for x in g]))

    # -- the 1,600 outputs ------------------------------------------------------------------------------
    items = [r.item for r in dataset.records]
    base = [r.value for r in reward(items)]
    out_gains = gains(items)
    human = {a: [r.human[a] for r in dataset.records] for a in dataset.records[0].human if a != "overall"}
    groups = [r.group for r in dataset.records]

    # -- the probe texts ---------------------------------------------------------------------------------
    rows = []  # (article, kind, family, text)
    for i, pair in enumerate(pairs):
        rows.append((i, "real", "", pair.output))
        if i < 60:
            fams = [f for f in FAMILIES] if (args.families and i < 20) else ["truncation"]
            for q in build_probes(pair, other_items(pairs, i), reward.judge.aspects, fams):
                rows.append((i, "fair" if is_fair(q.family, q.variant) else "suite", q.family, q.output))
        for name, make in WORDINGS.items():
            text = make(pair.output.strip())
            if text and text.strip() and text.strip() != pair.output.strip():
                rows.append((i, "unlisted", "truncation", text))
    probe_items = [Item(t, pairs[i].source) for i, _, _, t in rows]
    values, probe_gains = [], []
    for lo in tqdm(range(0, len(probe_items), 64), desc="probe texts"):
        chunk = probe_items[lo:lo + 64]
        values += [r.value for r in reward(chunk)]
        probe_gains += gains(chunk)

    print(f"{len(items)} outputs ({sum(g is None for g in out_gains)} without coverage), "
          f"{len(rows)} probe texts ({sum(g is None for g in probe_gains)} without)\n")
    for budget in args.budgets:
        cov_out = [coverage(g, budget) for g in out_gains]
        cov_probe = [coverage(g, budget) for g in probe_gains]
        real_cov = [c for (i, k, _, _), c in zip(rows, cov_probe) if k == "real"]
        print(f"## B = {budget}: coverage of outputs median {np.nanmedian([c for c in cov_out if c is not None]):.2f}, "
              f"highlights {np.median([c for c in real_cov if c is not None]):.2f}\n")
        print("| weight | agreement (coh/con/flu/rel) | selection gain | suite trunc 20 / 20-60 | unlisted 20 / 20-60 / 60-100 | "
              "other families over 0 (first 20) |\n|---|---|---|---|---|---|")
        for w in args.weights:
            v_out = [None if b is None or c is None else b + w * c for b, c in zip(base, cov_out)]
            table = _agreement({"r": v_out}, human, groups, n_bootstrap=0, seed=0)["r"]
            rho = " / ".join(f"{table[a]['sample/spearman']['value']:.3f}" for a in human)
            gain = " / ".join(f"{selection(groups, human[a], {'r': v_out})['r']['gain']:+.2f}" for a in human)
            v_probe = [None if b is None or c is None else b + w * c for b, c in zip(values, cov_probe)]
            real = {i: v for (i, k, _, _), v in zip(rows, v_probe) if k == "real"}
            wins: dict[tuple[str, str, int], set] = {}
            for (i, kind, fam, _), v in zip(rows, v_probe):
                if kind in ("real",) or v is None or real.get(i) is None:
                    continue
                s = next(n for n, (lo, hi, _) in enumerate(SLICES) if lo <= i < hi)
                if beats(v, real[i]):
                    wins.setdefault((kind, fam, s), set()).add(i)
            n = {s: len({i for i, k, _, _ in rows if k == "real" and SLICES[s][0] <= i < SLICES[s][1]}) for s in range(3)}
            suite = " / ".join(f"{len(wins.get(('suite', 'truncation', s), ()))}/{n[s]}" for s in range(2))
            unl = " / ".join(f"{len(wins.get(('unlisted', 'truncation', s), ()))}/{n[s]}" for s in range(3))
            others = ", ".join(f"{f} {len(ws)}" for (k, f, s), ws in sorted(wins.items())
                               if k == "suite" and f != "truncation" and s == 0)
            fair = ", ".join(f"{f} {len(ws)}" for (k, f, s), ws in sorted(wins.items()) if k == "fair" and s == 0)
            print(f"| {w:g} | {rho} | {gain} | {suite} | {unl} | {others or '-'} (fair: {fair or '-'}) |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
