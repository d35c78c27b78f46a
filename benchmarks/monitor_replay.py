"""Replay the reward divergence monitor (``judge_reward.bias_audit.divergence``) over saved GRPO runs.

``benchmarks/grpo_hacking.py`` writes every training completion to ``<run>/completions.jsonl``; this
script feeds them to the monitor step by step, as the callback would have seen them during training,
and prints per check the reward's rise, each signal's baseline and latest values and when the rule
first held (``patience`` checks in a row). ``--damage-every N`` also measures damage sensitivity every
N steps with the run's own judge and reward (loads the judge; the other signals need no model).

    python benchmarks/monitor_replay.py --root reports/grpo --runs monitor_gptscore_alone monitor_geval_alone
    python benchmarks/monitor_replay.py --root reports/grpo --runs monitor_default --json reports/monitor.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import data_dir  # noqa: E402


def load_run(run_dir: Path) -> tuple[list[dict], dict]:
    path = run_dir / "completions.jsonl"
    if not path.exists():
        sys.exit(f"error: --runs: no {path} (runs of benchmarks/grpo_hacking.py write it)")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return rows, summary


def damage_scorer(args_of_run: dict, guards: str):
    """The run's reward (its judge config, aspects and guard setting), as ``score(texts, sources)``."""
    from judge_reward.bias_audit.divergence import reward_scorer
    from grpo_hacking import build_rewards, load_judge
    from judge_reward.reward import Reward

    judge = load_judge(args_of_run["config"], args_of_run.get("aspects"))
    unguarded, guarded, _ = build_rewards(judge, args_of_run.get("fallback_guards", False))
    cfg = guarded if guards == "on" else unguarded
    return reward_scorer(Reward(judge, cfg.reward_config()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", default=str(ROOT / "docs" / "grpo_hacking"), help="folder of the saved runs")
    p.add_argument("--runs", nargs="+", required=True)
    p.add_argument("--data", default=None)
    p.add_argument("--max-source-words", type=int, default=None,
                   help="the run's article cut (default: its summary.json's, else 70)")
    p.add_argument("--max-completion-length", type=int, default=None,
                   help="the run's generation limit, which tells a cut from an ending without a full stop "
                        "(default: its summary.json's; without either, the text rule alone)")
    p.add_argument("--damage-every", type=int, default=0, help="damage sensitivity every N steps (loads the judge)")
    p.add_argument("--json", default=None, help="also write every run's checks here")
    args = p.parse_args()

    from judge_reward.bias_audit.divergence import DivergenceConfig, replay
    from grpo_hacking import load_articles

    data = data_dir(args.data)
    out = {}
    for run in args.runs:
        rows, summary = load_run(Path(args.root) / run)
        run_args = summary.get("args", {})
        words = args.max_source_words or run_args.get("max_source_words") or 70
        articles = load_articles(data, words)
        sources = {a["doc_id"]: a["source"] for a in articles}
        references = {a["doc_id"]: a["reference"] for a in articles if a["reference"]}
        limit = args.max_completion_length or run_args.get("max_completion_length")
        config = DivergenceConfig(damage_every_n_steps=args.damage_every, max_completion_tokens=limit)
        if args.damage_every and "config" not in run_args:
            sys.exit(f"error: --damage-every: run {run!r} has no summary.json (a run stopped before its end): "
                     "its judge config, aspects and guard setting are unknown")
        score = damage_scorer(run_args, summary.get("guards", "off")) if args.damage_every else None
        monitor = replay(rows, sources, references, config, score)
        first = next((f["step"] for f in monitor.flags), None)
        print(f"\n## {run}: {len(monitor.history)} steps, first flag at step {first}, {len(monitor.flags)} flags in "
              f"{sum(c['ready'] for c in monitor.checks)} checks; unfinished = "
              + (f"no sentence end at the {limit}-token limit" if limit else "no sentence end (no limit known)"))
        print("| step | reward z | flag | " + " | ".join(f"{n} (base -> recent, z)" for n in
                                                          ("judge_alone", "reference_overlap", "unsupported", "unfinished",
                                                           "damage_sensitivity")) + " |")
        print("|---|---|---|---|---|---|---|---|")
        for c in monitor.checks:
            if not c["ready"]:
                continue
            cells = []
            for n in ("judge_alone", "reference_overlap", "unsupported", "unfinished", "damage_sensitivity"):
                s = c["signals"].get(n)
                cells.append(f"{s['baseline']:.3f} -> {s['recent']:.3f} ({s['worse_z']:+.1f})" if s else "-")
            print(f"| {c['step']} | {c['reward_z']:.1f} | {'FLAG' if c['flag'] else ''} | " + " | ".join(cells) + " |")
        out[run] = {**monitor.to_json(), "first_flag": first}
    if args.json:
        from judge_reward.bias_audit.divergence import _jsonable

        Path(args.json).write_text(json.dumps(_jsonable(out), indent=1))


if __name__ == "__main__":
    main()
