"""How many of a summary's words are not in its article, for people and for systems (no model, seconds).

The ``grounding`` guard charges a summary for the share of its content words the source lacks. It
catches outputs about something else, filler and praise; whether it can also catch invented facts
depends on how far people's own summaries go past the source's words. This prints, with a
config's grounding settings (``default`` unless ``--config``):

* the novel-word share of SummEval's 1,100 human highlights (11 per article) and 1,600 system
  summaries: median, quartiles, 90th percentile, and the share of each above several thresholds;
* the grounding charge the config's guard puts on them (mean, and the share charged at all);
* its summary-level Spearman correlation (mean over the 100 articles) with the SummEval raters;
* the same figures for a JSONL file of outputs (``--outputs``; default the quick start's
  ``examples/news_summaries.jsonl``).

    python experiments/novel_words.py                  # the README's quick-start note
    python experiments/novel_words.py --config geval_gemma
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common.py and the benchmark scripts this study reuses
from _common import ROOT, data_dir, summeval  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from judge_reward import ConfigError, JudgeConfig  # noqa: E402
from judge_reward.guards import SourceStats, apply_guards  # noqa: E402
from judge_reward.reward import RewardConfig  # noqa: E402

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
THRESHOLDS = (0.3, 0.45, 0.6)


def grounding_only(config_name: str):
    """The config's guards with everything but grounding turned off."""
    raw = json.loads(json.dumps(JudgeConfig.from_yaml(config_name).reward or {}))
    guards = raw.get("guards", {})
    if not guards.get("grounding", {}).get("enabled"):
        raise SystemExit(f"error: config {config_name!r}: reward.guards.grounding is not enabled")
    raw["guards"] = {"grounding": guards["grounding"]}
    return RewardConfig.from_dict(raw).guards


def measure(guards, output: str, source: SourceStats) -> tuple[float, float]:
    """The grounding guard's novel-word share and charge, as the reward measures them."""
    report = apply_guards(guards, output, source)
    return report.measured["grounding"]["novel_word_share"], report.penalties["grounding"]


def describe(name: str, shares: np.ndarray, charges: np.ndarray) -> None:
    q1, med, q3, p90 = np.percentile(shares, [25, 50, 75, 90])
    above = ", ".join(f"> {t:.2f}: {np.mean(shares > t):.1%}" for t in THRESHOLDS)
    print(f"{name} (n={len(shares)}): novel-word share median {med:.3f} [quartiles {q1:.3f}-{q3:.3f}, "
          f"p90 {p90:.3f}]; {above}; grounding charge mean {charges.mean():.3f}, charged {np.mean(charges > 0):.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="default", help="judge config whose reward.guards.grounding is used")
    ap.add_argument("--outputs", default=str(ROOT / "examples" / "news_summaries.jsonl"),
                    help="JSONL with source and output fields (and id) to measure too")
    ap.add_argument("--data", default=None, help="summeval.json (default: the data folder's)")
    args = ap.parse_args()
    try:
        guards = grounding_only(args.config)
    except ConfigError as err:
        raise SystemExit(f"error: --config {args.config}: {err}") from None
    path = Path(args.outputs)
    if not path.is_file():
        raise SystemExit(f"error: --outputs {path}: no such file")
    print(f"config {args.config}: {guards.grounding}")

    docs = summeval(data=args.data)
    references = json.loads(data_dir(None, "summeval", "references.json").read_text())
    human, system, rho = [], [], {a: [] for a in ASPECTS}
    for doc in docs:
        source = SourceStats(doc[0]["source"])
        human += [measure(guards, text, source) for text in references[doc[0]["doc_id"]]]
        rows = [measure(guards, r["system_output"], source) for r in doc]
        system += rows
        charges = [c for _, c in rows]
        if np.std(charges) > 0:  # a document whose summaries are all charged alike has no order
            for a in ASPECTS:
                rho[a].append(spearmanr([-c for c in charges], [r["scores"][a] for r in doc])[0])
    describe("human highlights", *map(np.array, zip(*human)))
    describe("system summaries", *map(np.array, zip(*system)))
    print("summary-level Spearman of -(grounding charge) with the raters, over the "
          f"{len(rho['consistency'])} articles where the charge varies: "
          + ", ".join(f"{a} {np.nanmean(v):+.3f}" for a, v in rho.items()))

    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
                output, source = row["output"], row["source"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise SystemExit(f"error: {path}:{lineno}: expected a JSON object with output and source ({err})") from None
            share, charge = measure(guards, output, SourceStats(source))
            print(f"{path.name} {row.get('id', '?')}: novel-word share {share:.3f}, grounding charge {charge:.3f}")


if __name__ == "__main__":
    main()
