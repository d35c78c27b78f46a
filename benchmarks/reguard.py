"""Re-measure a reward change without the judge: replay saved judge scores through a changed reward.

Guards are deterministic functions of the texts, so a change to a config's ``reward:`` section
(a guard's threshold or weight, a guard turned on) needs no model: the saved judge scores are
replayed through the real :class:`judge_reward.reward.Reward` with the changed section.

* ``--probes FILE``: a saved probe report (``probes.json`` from ``benchmarks/probe_summeval.py``);
  the pairs are rebuilt from SummEval with the report's own ``--docs``/``--max-source-words``/
  ``--real``, every text is re-rewarded and the family table printed (``--out DIR`` writes the
  report again: markdown, PNG, JSON).
* ``--scores FILE``: saved per-summary judge scores (``benchmarks/summeval_correlation.py --save``);
  prints summary-level Spearman of the judge alone and of each aspect's guarded reward.

    python benchmarks/reguard.py --config geval_gemma --probes docs/probes_summeval/geval_gemma/probes.json \\
        --set grounding.sentence_threshold=0.75
    python benchmarks/reguard.py --config gptscore --scores scores.json --set copy.weight=0.4

``--set guard.field=value`` (repeatable) changes ``reward.guards``; ``--set off`` turns every
guard off. A replayed text the saved run never judged is an error, not a silent score, and so is a
reward that reads the judge's token log-probabilities (the term ``information``; the guards
``copy_credit``, ``information``, ``likelihood_floor``: the ``information`` config), which saved runs
do not keep.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import yaml
from _common import data_dir

from judge_reward import JudgeConfig, load_aspects
from judge_reward.metaeval.correlation import sample_level
from judge_reward.methods.base import Item, Score
from judge_reward.probes import run_probes
from judge_reward.reward import Reward, RewardConfig

ASPECTS = ("coherence", "consistency", "fluency", "relevance")


class ReplayJudge:
    """A stand-in judge (what :class:`Reward` accepts) that answers from saved raw scores, keyed by
    (judged text, source)."""

    def __init__(self, config: JudgeConfig, table: dict[tuple[str, str], dict[str, float | None]], model_id: str = "",
                 unknown_fails: bool = False):
        self.unknown_fails = unknown_fails  # a text the saved run never judged: a failed score (else an error)
        self.unknown = 0
        self.config = config
        self.backend = SimpleNamespace(model_id=f"{model_id}, replayed" if model_id else "replayed")
        self.aspect_set = load_aspects(config.aspects_file)
        self.aspects = self.aspect_set.select(config.aspects)
        self.table = table

    def score(self, items, aspects=None, method=None):
        out = []
        for item in items:
            saved = self.table.get((item.output, item.source))
            if saved is None and self.unknown_fails:
                self.unknown += 1
                out.append({a.name: Score(None, "not judged in the saved run (a wording added since)") for a in self.aspects
                            if aspects is None or a.name in aspects})
                continue
            if saved is None:
                raise KeyError(f"the saved run never judged this text: {item.output[:80]!r}")
            out.append({a: Score(v) if v is not None else Score(None, "failed in the saved run") for a, v in saved.items()
                        if aspects is None or a in aspects})
        return out


def changed_section(config: JudgeConfig, sets: list[str]) -> RewardConfig:
    raw = json.loads(json.dumps(config.reward or {}))
    guards = raw.setdefault("guards", {})
    for item in sets:
        if item == "off":
            raw["guards"] = guards = {}
            continue
        key, _, value = item.partition("=")
        name, _, field = key.partition(".")
        section = guards.setdefault(name, {"enabled": True})
        if section is True:
            section = guards[name] = {"enabled": True}
        section[field] = yaml.safe_load(value)
    return RewardConfig.from_dict(raw)


def raw_value(component: float, aspect, reward: Reward) -> float:
    """The judge's own value back from a saved normalised reward component."""
    if reward.config.normalise == "none":
        return component
    if reward.method_name == "geval" and reward.config.normalise == "unit":
        return aspect.scale.low + component * (aspect.scale.high - aspect.scale.low)
    raise SystemExit(f"error: cannot invert normalise {reward.config.normalise!r} for {reward.method_name}")


def replay_probes(args, config: JudgeConfig, section: RewardConfig) -> None:
    from probe_summeval import summeval_pairs

    saved = json.loads(Path(args.probes).read_text())
    meta = saved["meta"]
    pairs = summeval_pairs(data_dir(None, "summeval", "summeval.json"), meta["n_pairs"], meta.get("real", "reference"),
                           meta.get("max_source_words"))
    source_of = {p.id: p.source for p in pairs}
    original = Reward(ReplayJudge(config, {}), RewardConfig.from_dict(config.reward or {}))
    table = {}
    for item in saved["items"]:
        source = source_of[item["id"]]
        for text, components in [(item["output"], item["components"]),
                                 *((p["output"], p["components"]) for p in item["probes"])]:
            judged = original.prepare([Item(text, source)])[0][0].output  # what the saved run's judge read
            if judged.strip():
                table[(judged, source)] = {a.name: raw_value(components[f"aspect/{a.name}"], a, original)
                                           for a in original.aspects if f"aspect/{a.name}" in components}
    judge = ReplayJudge(config, table, meta.get("reward", {}).get("model", ""), unknown_fails=True)
    reward = Reward(judge, section)
    # the saved run's families: a family added since has no saved scores
    families = list(dict.fromkeys(p["family"] for item in saved["items"] for p in item["probes"]))
    report = run_probes(reward, pairs, families=families, progress=False)
    report.meta.update({k: v for k, v in meta.items() if k not in report.meta or k in ("seconds", "texts_scored")})
    report.meta.update(replayed_from=str(args.probes), guards_changed=args.set)
    print(f"## {meta.get('config')} probes replayed with {' '.join(args.set) or 'the saved reward section'}\n")
    if judge.unknown:
        print(f"{judge.unknown} text(s) the saved run never judged (wordings added since, or texts the changed "
              "guards rewrite) count as no reward\n")
    print(report.to_markdown(args.max_win_rate, variants=False))
    if args.out:
        paths = report.write(Path(args.out), args.max_win_rate)
        print("wrote " + ", ".join(str(p) for p in paths.values()))


def replay_scores(args, config: JudgeConfig, section: RewardConfig) -> None:
    saved = json.loads(Path(args.scores).read_text())
    rows = saved["rows"]
    method = config.method
    table = {(r["output"], r["source"]): r["judge"][method] for r in rows}
    items = [Item(r["output"], r["source"]) for r in rows]
    groups = [r["doc_id"] for r in rows]
    reward = Reward(ReplayJudge(config, table, saved["meta"].get("model", "")), section)
    rewarded = reward(items)
    penalised = sum(any(c > 0 for k, c in r.components.items() if k.startswith("guard/")) for r in rewarded)
    print(f"## {method}: {len(rows)} summaries of {saved['meta']['docs']} SummEval documents, "
          f"guards {', '.join(reward.guards.enabled) or 'none'} ({' '.join(args.set) or 'as saved'}); "
          f"{penalised} summaries penalised\n")
    print("| aspect | judge | guarded reward | change |\n|---|---|---|---|")
    for aspect in ASPECTS:
        human = [r["human"][aspect] for r in rows]
        judged = [r["judge"][method].get(aspect) for r in rows]
        guarded = [None if r.components.get(f"aspect/{aspect}") is None else r.components[f"aspect/{aspect}"] - sum(
            c for k, c in r.components.items() if k.startswith("guard/")) for r in rewarded]
        j, g = sample_level(judged, human, groups, "spearman"), sample_level(guarded, human, groups, "spearman")
        print(f"| {aspect} | {j:.3f} | {g:.3f} | {g - j:+.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the judge config whose reward section is changed")
    parser.add_argument("--probes", default=None, help="a saved probes.json")
    parser.add_argument("--scores", default=None, help="saved judge scores from summeval_correlation.py --save")
    parser.add_argument("--set", action="append", default=[], help="guard.field=value, or 'off' (repeatable)")
    parser.add_argument("--out", default=None, help="write the replayed probe report here")
    parser.add_argument("--max-win-rate", type=float, default=0.1)
    args = parser.parse_args()
    if not (args.probes or args.scores):
        parser.error("give --probes and/or --scores")
    config = JudgeConfig.from_yaml(args.config)
    section = changed_section(config, args.set)
    reading = (["term information"] if section.term == "information" else []) + section.guards.reading_unconditional
    if reading:  # saved runs keep each aspect's value, not the token log-probabilities these read
        raise SystemExit(f"error: {args.config}: reward {', '.join(reading)} read the judge's token "
                         "log-probabilities, which a saved run does not keep; re-run the judge "
                         "(benchmarks/probe_summeval.py, benchmarks/summeval_correlation.py) instead of replaying")
    if args.probes:
        replay_probes(args, config, section)
    if args.scores:
        replay_scores(args, config, section)


if __name__ == "__main__":
    main()
