"""How long the `data_to_text` preset's guards take per output, with and without the task's domain.

The `data_values` guard with ``domain: inputs`` looks for every value the task's other inputs give
(another venue's name, food, area) in each output. This times the preset's guards (text only, no
judge) on BAGEL's or SFRES's rated sentences, their human references and, for each act, another
act's sentence (the outputs where added values turn up), and prints medians [min-max] of
``--repeats`` runs, per output, against the same guards with the domain off (the baseline).

    python benchmarks/guard_speed.py --data sfres
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from _common import data_dir, median_range, timings


def outputs(rows: list[dict]) -> list[tuple[str, str]]:
    """(act, text) pairs: every system sentence, every reference, and each act with another's sentence."""
    pairs = [(r["source"], r["system_output"]) for r in rows]
    pairs += [(s, ref) for s, refs in {r["source"]: r["references"] for r in rows}.items() for ref in refs]
    pairs += [(rows[i]["source"], rows[(i * 7 + 3) % len(rows)]["system_output"]) for i in range(len(rows))]
    return pairs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", choices=("bagel", "sfres"), default="sfres")
    p.add_argument("--data-dir", default=None, help="the data folder (default: $JUDGE_REWARD_DATA, ../shared/data)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    from judge_reward.guards import SourceStats, apply_guards
    from judge_reward.judge import JudgeConfig
    from judge_reward.reward_config import RewardConfig

    rows = json.loads((data_dir(args.data_dir, "d2t") / f"{args.data}.json").read_text())
    pairs = outputs(rows)
    stats = {s: SourceStats(s) for s, _ in pairs}
    shipped = RewardConfig.from_dict(JudgeConfig.load("data_to_text").reward).guards
    settings = {}
    for name, domain in (("domain off (baseline)", None), ("domain: inputs (shipped)", "inputs")):
        guards = dataclasses.replace(shipped, data_values=dataclasses.replace(shipped.data_values, domain=domain))
        if domain:
            guards.data_values.use_inputs([r["source"] for r in rows])
        times, charged = timings(lambda: sum(apply_guards(guards, t, stats[s]).total > 0 for s, t in pairs), args.repeats)
        settings[name] = [t / len(pairs) * 1e3 for t in times]
        print(f"{name}: {median_range(settings[name], 3)} ms per output; {charged} of {len(pairs)} charged")
    base, shipped_ms = (sorted(v)[len(v) // 2] for v in settings.values())
    print(f"{args.data}, {len(pairs)} outputs: the domain costs {shipped_ms / base:.2f}x the guards without it")


if __name__ == "__main__":
    main()
