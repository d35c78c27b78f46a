"""Truncation and the ``ending`` guard: the text rule (``mode: cut``) against the judge's sentence-end
check (``mode: judge``), on the same judge and data.

Part 1, attacks. For SummEval's first ``--docs`` articles (the pairs ``judge-reward validate`` probes:
the first human highlight, the source cut to 400 words), the ``truncation`` and ``copy_source`` probe
families under ``--config`` (default: ``default``) with its ending guard as shipped and with
``mode: judge`` at each ``--threshold``: the share of articles on which the family's best attack
wording beats the highlight, on the first 20 articles (the ones the guards were chosen on) and on
the rest (held out).

Part 2, honest outputs. SummEval's 1,600 system outputs and its 1,100 human references: the share
each setting charges. With ``--agreement-cache`` (a judgment cache holding the config's judge
values for the 1,600 outputs, e.g. the scoreboard's; ``--agreement-dtype`` its dtype) also the
reward's summary-level Spearman with the experts per aspect and its selection gain (what its top
pick among each article's 16 summaries is rated, as the scoreboard computes it) under each setting: the cached reward
with the ending charge swapped for the other setting's (when the cache's dtype differs from this
run's, the charges come from this run's judge and the rest from the cache: an estimate), and the
share of the scoreboard's damaged copies (4 outputs per article, every family) scored below
their original.

    python experiments/ending_judge.py --docs 60 --dtype float32 --cache .cache/ending_fp32.sqlite \\
        --agreement-cache .cache/scoreboard/default_bf16.sqlite --agreement-dtype bfloat16 --json reports/ending_judge.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _common import judge_config  # noqa: E402



def reward_with(base, judge, ending: dict):
    from judge_reward.reward import Reward, RewardConfig

    raw = json.loads(json.dumps(base.reward))
    raw["guards"]["ending"] = {**raw["guards"].get("ending", {}), **ending}
    return Reward(judge, RewardConfig.from_dict(raw))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default")
    p.add_argument("--docs", type=int, default=60)
    p.add_argument("--chosen", type=int, default=20, help="the first N articles are where the guards were chosen")
    p.add_argument("--threshold", type=float, nargs="+", default=[0.01, 0.02, 0.05])
    p.add_argument("--setting", action="append", default=[], metavar="NAME=JSON",
                   help='instead of the thresholds, an ending guard setting to compare with the shipped one, e.g. '
                        '\'judge u.5={"mode": "judge", "unfinished_weight": 0.5}\' (repeatable)')
    p.add_argument("--dtype", default=None)
    p.add_argument("--cache", default=None)
    p.add_argument("--agreement-cache", default=None)
    p.add_argument("--agreement-dtype", default=None)
    p.add_argument("--data", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args()

    from judge_reward.cli_validate import load_rated
    from judge_reward.guards import GuardsConfig, SourceStats, apply_guards, needs_sentence_end
    from judge_reward.judge import Judge
    from judge_reward.methods.base import Item
    from judge_reward.probes import run_probes
    from judge_reward.scoreboard import attack_tables, probe_pairs

    start = time.perf_counter()
    cfg = judge_config(args.config, args.dtype, args.cache)
    judge = Judge(cfg)
    shipped = dict(cfg.reward["guards"]["ending"])
    settings = {f"shipped ({shipped.get('mode')})": {}}
    if args.setting:
        for spec in args.setting:
            name, _, raw = spec.partition("=")
            settings[name.strip()] = json.loads(raw)
    else:
        settings |= {f"judge < {t:g}": {"mode": "judge", "end_probability": t} for t in args.threshold}
    rewards = {name: reward_with(cfg, judge, ending) for name, ending in settings.items()}
    dataset, refs = load_rated("summeval", Path(args.data) if args.data else None)
    out: dict = {"settings": settings, "attacks": {}, "honest": {}}

    # -- part 1: attacks ----------------------------------------------------------------------
    pairs = probe_pairs(dataset, refs, args.docs, 400)
    print(f"## Attacks: {len(pairs)} articles (first {args.chosen}: chosen on; the rest: held out)\n")
    print("| setting | family | first | held out |\n|---|---|---|---|")
    for name, reward in rewards.items():
        report = run_probes(reward, pairs, families=["truncation", "copy_source"], n_boot=0, progress=False)
        parts = {"first": attack_tables(report.items[:args.chosen]), "held_out": attack_tables(report.items[args.chosen:])}
        out["attacks"][name] = parts
        for fam in ("truncation", "copy_source"):
            cells = []
            for part in ("first", "held_out"):
                row = parts[part]["families"].get(fam)
                cells.append(f"{row['wins']}/{row['n']} ({row['win_rate']:.2f})" if row else "-")
            print(f"| {name} | {fam} | {cells[0]} | {cells[1]} |")
        for fam in ("truncation", "copy_source"):  # the fair wordings (a shorter summary, the lead)
            cells = [f"{row['wins']}/{row['n']} ({row['win_rate']:.2f})" if (row := parts[part]["fair"].get(fam)) else "-"
                     for part in ("first", "held_out")]
            print(f"| {name} | {fam} (fair) | {cells[0]} | {cells[1]} |")

    # -- part 2: honest outputs ------------------------------------------------------------------
    outputs = [(r.item.output, " ".join((r.item.source or "").split()[:400])) for r in dataset.records]
    references = [(ref, " ".join((r.item.source or "").split()[:400]))
                  for r in {r.group: r for r in dataset.records}.values() for ref in refs.get(r.group, [])]
    asked = [(t, s) for t, s in outputs + references if needs_sentence_end(t)]
    probs = dict(zip(asked, [sc.value for sc in judge.sentence_end([Item(t, s) for t, s in asked])]))

    guards = {name: GuardsConfig.from_dict({"ending": {**shipped, **setting, "enabled": True}}) for name, setting in settings.items()}
    stats: dict[str, SourceStats] = {}

    def charge(text: str, source: str, name: str, ends: dict) -> float:
        """What the ending guard of setting ``name`` charges (the guard itself, given the judge's answer)."""
        source_stats = stats.get(source) or stats.setdefault(source, SourceStats(source))
        return apply_guards(guards[name], text, source_stats, sentence_end=ends.get((text, source))).penalties["ending"]

    print(f"\n## Honest texts charged ({len(asked)} asked the judge)\n")
    print("| setting | system outputs | references |\n|---|---|---|")
    per_output = {}
    for name in settings:
        per_output[name] = [charge(t, s, name, probs) for t, s in outputs]
        o = [c > 0 for c in per_output[name]]
        rr = [charge(t, s, name, probs) > 0 for t, s in references]
        out["honest"][name] = {"outputs": sum(o) / len(o), "references": sum(rr) / len(rr)}
        print(f"| {name} | {sum(o)}/{len(o)} ({sum(o) / len(o):.3f}) | {sum(rr)}/{len(rr)} ({sum(rr) / len(rr):.3f}) |")

    if args.agreement_cache:
        from judge_reward.reward import Reward
        from judge_reward.scoreboard import _agreement, selection

        acfg = judge_config(args.config, args.agreement_dtype, args.agreement_cache)
        # replay only: a text the cache lacks gets a None reward, left out, never judged in another dtype
        acfg.cache["replay_only"] = True
        # the text rule here: its charge is swapped below, and a judge-mode guard would ask the
        # agreement cache for sentence-end answers it may not hold (a None reward for each)
        acfg.reward = {**acfg.reward, "guards": {**acfg.reward["guards"],
                                                 "ending": {**acfg.reward["guards"]["ending"], "mode": "cut"}}}
        cached = Reward.from_config(acfg)
        base = cached(dataset.items)  # the items exactly as the scoreboard scored them (its cache keys)
        human = {a: [r.human[a] for r in dataset.records] for a in dataset.records[0].human}
        groups = [r.group for r in dataset.records]
        print("\n## The reward on the 1,600 outputs: summary-level Spearman with the experts and selection gain "
              "(coherence, consistency, fluency, relevance)\n")
        out["agreement"] = {}

        def value(res, charge_now: float):
            """The cached reward with its ending charge swapped for this setting's."""
            if res.value is None:
                return None
            return res.value + res.components.get("guard/ending", 0.0) - charge_now

        for name in settings:
            values = [value(res, per_output[name][k]) for k, res in enumerate(base)]
            table = _agreement({"reward": values}, human, groups, n_bootstrap=0, seed=0)["reward"]
            rho = {a: table[a]["sample/spearman"]["value"] for a in human}
            gain = {a: selection(groups, human[a], {"reward": values})["reward"]["gain"] for a in human}
            out["agreement"][name] = rho
            out.setdefault("selection", {})[name] = gain
            print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in rho.values()) + " | selection gain "
                  + " / ".join(f"{v:+.2f}" for v in gain.values()) + " |")
        # damaged copies (the scoreboard's sample): share scored below their original, charges swapped
        from judge_reward.damage import FAMILIES, damage
        from judge_reward.scoreboard import damage_sample, share_below

        picked = damage_sample(groups, 4, None, 0)
        copies = [(k, fam, Item(text, it.source, it.reference, f"{it.id}/{fam}"))
                  for k in picked for it in [dataset.records[k].item]
                  for fam, text in damage(it.output, it.source or "", seed=0).items()]
        damaged = cached([c[2] for c in copies])
        ask = [c[2] for c in copies if needs_sentence_end(c[2].output)]
        ends = dict(zip([(i.output, i.source or "") for i in ask], [sc.value for sc in judge.sentence_end(ask)]))
        print(f"\n## Damaged copies of {len(picked)} outputs ({len(copies)} texts, {len(ask)} asked the judge): "
              "share scored below the original\n")
        print("| setting | " + " | ".join(FAMILIES) + " |\n|---|" + "---|" * len(FAMILIES))
        out["damage"] = {}
        for name in settings:
            pairs: dict[str, list] = {}
            for (k, fam, item), res in zip(copies, damaged):
                orig = value(base[k], per_output[name][k])
                pairs.setdefault(fam, []).append((orig, value(res, charge(item.output, item.source or "", name, ends))))
            shares = {fam: share_below(v)["share_below"] for fam, v in pairs.items()}
            out["damage"][name] = shares
            print(f"| {name} | " + " | ".join(f"{shares.get(f, float('nan')):.3f}" for f in FAMILIES) + " |")
    out["seconds"] = time.perf_counter() - start
    print(f"\n{out['seconds']:.0f} s; judge: {judge.stats()}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
