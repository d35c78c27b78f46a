"""Does an output that begins again and stops (a loop cut by the token limit) ever happen honestly,
and what does charging it as a cut ending change? (Honest texts: seconds, no model; probes: ~2 min.)

``guards.starts_over`` reads an output whose last sentence, with no full stop, is the start of one
of its earlier sentences as cut (``ending`` in ``cut`` and ``judge`` modes). This prints:

* how many of the rated sets' honest outputs (system outputs and human references of SummEval,
  Topical-Chat, BAGEL and SFRES) do it: the charge's cost;
* with ``--probes``, the ``repeat_output`` probe family (its ``loops_back_to_start`` wording is the
  output then its first half again) for ``--config`` on the first ``--pairs`` SummEval highlights,
  with the source withheld when the config reads none, scored with the rule and without it.

    python experiments/restart_endings.py
    python experiments/restart_endings.py --probes --config open_ended --dtype float32 --cache judgments.sqlite
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common.py
from _common import data_dir  # noqa: E402

import judge_reward.guards as guards  # noqa: E402
from judge_reward.cli_validate import load_rated  # noqa: E402
from judge_reward.guards import ends_complete, starts_over  # noqa: E402

SETS = ("summeval", "topical_chat", "bagel", "sfres")


def honest_texts(name: str, root: Path) -> list[str]:
    data, references = load_rated(name, root)
    texts = [r.item.output for r in data.records]
    return texts + sorted({x for refs in (references or {}).values() for x in refs})


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="the data folder (default $JUDGE_REWARD_DATA, else ../shared/data)")
    ap.add_argument("--probes", action="store_true", help="also score the repeat_output probes with and without the rule")
    ap.add_argument("--config", default="open_ended")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--cache", help="judgment cache (SQLite)")
    args = ap.parse_args(argv)
    root = data_dir(args.data)

    for name in SETS:
        texts = honest_texts(name, root)
        hits = [t for t in texts if not ends_complete(t) and starts_over(t)]
        print(f"{name}: {len(texts)} honest outputs, {len(hits)} begin again and stop")
        for t in hits[:5]:
            print("   ", t[-160:])
    if not args.probes:
        return

    from judge_reward.judge import JudgeConfig
    from judge_reward.probes import run_probes
    from judge_reward.reward import Reward
    from judge_reward.scoreboard import attack_tables, probe_pairs

    config = JudgeConfig.load(args.config)
    config.backend = {**config.backend, "dtype": args.dtype}
    if args.cache:
        config.cache = {"path": args.cache}
    reward = Reward.from_config(config)
    data, references = load_rated("summeval", root)
    pairs = probe_pairs(data, references, args.pairs, 400, 0)
    withhold = not getattr(reward, "reads_source", True)  # as judge-reward validate does
    rule = guards.starts_over
    for label in ("with the rule", "without it"):
        guards.starts_over = rule if label == "with the rule" else (lambda *a, **k: False)
        report = run_probes(reward, pairs, ["repeat_output"], n_boot=0, progress=False, withhold_source=withhold)
        family = attack_tables(report.items)["families"]["repeat_output"]
        wins = ", ".join(f"{v} {row['wins']}" for v, row in family["variants"].items())
        print(f"{args.config}, repeat_output {label}: win rate {family['win_rate']:.2f} ({wins})")
    guards.starts_over = rule


if __name__ == "__main__":
    main()
