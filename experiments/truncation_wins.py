"""What do the truncations that still beat the highlight under ``default`` win with?

``default``'s ending guard charges an ending the judge finds unfinished; the truncations left
winning end on a clause that reads as a finished sentence without its full stop. Two questions:

Part 1, the full stop. For every truncation that beats its highlight (the probe suite's
``truncation`` attack wordings on the first 60 articles and the wordings of
``experiments/unlisted_truncations.py`` on all 100), the same text with a full stop appended is
scored too. If it still wins, the cut won as a finished shorter summary (what the fair wording
``first_sentence_only`` shows), not with a broken ending: no ending charge can take that away
without charging honest outputs that happen to end without a full stop.

Part 2, a pessimistic prior on the mean (``--prior K,C``, repeatable): each aspect's value becomes
``(sum_logprob + K * C) / (tokens + K)``, as if K more tokens of log-probability C were read, so a
short text's average is pulled toward C. Replayed from the caches' sums and token counts, without a
model call: the truncation wins per slice (first 20: chosen on; 20-60; 60-100: held out), and
with ``--agreement-cache`` the reward's summary-level Spearman and selection gain on the 1,600
outputs (ending guard ``cut`` there: the agreement cache lacks sentence-end answers).

    PYTHONPATH=. HF_HUB_OFFLINE=1 python experiments/truncation_wins.py --dtype float32 \\
        --cache .cache/ending/default_fp32.sqlite --prior 4,-3 --prior 8,-4 \\
        --agreement-cache .cache/scoreboard/default_bf16.sqlite --agreement-dtype bfloat16
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _common import judge_config  # noqa: E402

SLICES = ((0, 20, "first 20"), (20, 60, "20-60"), (60, 100, "60-100"))


def shrunk(result, prior: tuple[float, float] | None) -> float | None:
    """``result``'s reward with each aspect's mean log-probability replaced by the prior-weighted mean."""
    if result.value is None or prior is None:
        return result.value
    k, c = prior
    charged = sum(v for name, v in result.components.items() if name.startswith("guard/"))
    values = [(s.details["sum_logprob"] + k * c) / (sum(s.details["tokens"]) + k) for s in result.scores.values()]
    return statistics.mean(values) - charged


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default")
    p.add_argument("--docs", type=int, default=100)
    p.add_argument("--dtype", default=None)
    p.add_argument("--cache", default=None)
    p.add_argument("--prior", action="append", default=[], metavar="K,C")
    p.add_argument("--agreement-cache", default=None)
    p.add_argument("--agreement-dtype", default=None)
    p.add_argument("--data", type=Path, default=None)
    args = p.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).parent))
    from unlisted_truncations import WORDINGS

    from judge_reward.cli_validate import load_rated
    from judge_reward.methods.base import Item
    from judge_reward.probes import beats, build_probes, is_fair
    from judge_reward.reward import Reward
    from judge_reward.scoreboard import _agreement, probe_pairs, selection

    cfg = judge_config(args.config, args.dtype, args.cache)
    reward = Reward.from_config(cfg)
    dataset, refs = load_rated("summeval", args.data)
    pairs = probe_pairs(dataset, refs, args.docs, 400)
    priors = [None] + [tuple(float(x) for x in spec.split(",")) for spec in args.prior]

    # every truncation text of every article, and its reward
    from tqdm.auto import tqdm

    scored = []  # (article, wording, text, real result, text result)
    for i, pair in enumerate(tqdm(pairs, desc="articles", unit="article")):
        texts = {}
        if i < 60:
            texts |= {f"suite:{q.variant}": q.output for q in build_probes(pair, [], reward.judge.aspects, ["truncation"])
                      if not is_fair("truncation", q.variant)}
        for name, make in WORDINGS.items():
            text = make(pair.output.strip())
            if text and text.strip() and text.strip() != pair.output.strip():
                texts[f"unlisted:{name}"] = text
        results = reward([Item(pair.output, pair.source), *(Item(t, pair.source) for t in texts.values())])
        scored += [(i, w, t, results[0], r) for (w, t), r in zip(texts.items(), results[1:])]

    # -- part 1: the winners with a full stop ------------------------------------------------------
    winners = [s for s in scored if s[4].value is not None and s[3].value is not None and beats(s[4].value, s[3].value)]
    stopped = reward([Item(t.rstrip() + " .", pairs[i].source) for i, _, t, _, _ in winners])
    print(f"## {len(winners)} truncations beat their highlight under {args.config}\n")
    print("| article | wording | margin | with a full stop | ending |\n|---|---|---|---|---|")
    still = 0
    for (i, wording, text, real, res), with_stop in zip(winners, stopped):
        after = with_stop.value - real.value if with_stop.value is not None else None
        still += after is not None and beats(with_stop.value, real.value)
        print(f"| {i} | {wording} | {res.value - real.value:+.3f} | "
              f"{'n/a' if after is None else f'{after:+.3f}'} | ...{text[-45:]} |")
    print(f"\n{still} of {len(winners)} still beat the highlight with a full stop appended\n")

    # -- part 2: a prior on the mean ------------------------------------------------------------------
    print("## Truncation wins (some wording beats the highlight) under a prior on the mean\n")
    print("| prior K, C | suite " + " | suite ".join(s[2] for s in SLICES[:2]) + " | unlisted "
          + " | unlisted ".join(s[2] for s in SLICES) + " |\n|---|" + "---|" * 5)
    for prior in priors:
        wins: dict[tuple[str, int], set] = {}
        seen: dict[int, set] = {}
        for i, wording, _, real, res in scored:
            k = next(n for n, (lo, hi, _) in enumerate(SLICES) if lo <= i < hi)
            kind = wording.split(":")[0]
            seen.setdefault(k, set()).add(i)
            a, b = shrunk(res, prior), shrunk(real, prior)
            if a is not None and b is not None and beats(a, b):
                wins.setdefault((kind, k), set()).add(i)
        cells = [f"{len(wins.get(('suite', k), ()))}/{len(seen.get(k, ()))}" for k in range(2)]
        cells += [f"{len(wins.get(('unlisted', k), ()))}/{len(seen.get(k, ()))}" for k in range(3)]
        print(f"| {prior or 'none'} | " + " | ".join(cells) + " |")

    if args.agreement_cache:
        acfg = judge_config(args.config, args.agreement_dtype, args.agreement_cache)
        acfg.cache["replay_only"] = True  # a text the cache lacks gets a None reward, never judged
        acfg.reward["guards"]["ending"] = {**acfg.reward["guards"]["ending"], "mode": "cut"}
        base = Reward.from_config(acfg)(dataset.items)
        human = {a: [r.human[a] for r in dataset.records] for a in dataset.records[0].human if a != "overall"}
        groups = [r.group for r in dataset.records]
        print(f"\n## The reward on the {len(base)} outputs ({sum(r.value is None for r in base)} unscored): "
              "summary-level Spearman and selection gain, " + ", ".join(human) + "\n")
        for prior in priors:
            values = [shrunk(r, prior) for r in base]
            table = _agreement({"reward": values}, human, groups, n_bootstrap=0, seed=0)["reward"]
            rho = " / ".join(f"{table[a]['sample/spearman']['value']:.3f}" for a in human)
            gain = " / ".join(f"{selection(groups, human[a], {'reward': values})['reward']['gain']:+.2f}" for a in human)
            print(f"| {prior or 'none'} | {rho} | {gain} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
