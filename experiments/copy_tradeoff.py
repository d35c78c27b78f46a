"""How much may a copied word be worth? The information reward's trade-off between probes and agreement, swept.

The information reward (``reward.term: information``) counts words copied from the source (verbatim fragments of >= ``min_fragment``
words) as worth 0. This script gives them back a share ``alpha`` of what reading the source added to
their log-probabilities, in the two reward families this project tried, and measures each point:

* ``information + alpha``: the information reward (the information the output gives about its source
  within ``budget_tokens`` tokens, copied words 0, the readability floor and the text guards) plus
  ``alpha`` x the copied tokens' own information within the budget. ``alpha = 0`` is the shipped
  reward; the uncopied tokens' information recomputed here is checked against the term
  :class:`~judge_reward.reward.Reward` reported, so the copied tokens are the ones it left out.
  ``alpha = 1`` counts copied words like the others.
* ``judge - (1 - alpha) x copy gain``: GPTScore's mean log-probability per token given the source,
  with ``1 - alpha`` of the copied tokens' gain from the source taken back, minus the same floor and
  text guards. ``alpha = 0`` is copy credit without the contrast (GRPO run 6's term);
  ``alpha = 1`` is the judge with the floor and the text guards.

For each point: summary-level Spearman of the reward against each aspect's expert ratings on the
first ``--docs`` SummEval documents (16 system summaries each), and on how many of the first
``--probe-docs`` articles (cut to ``--max-source-words``; the human highlight is the real summary)
the best wording of the probe families that copying and shortening touch (``copy_source``,
``truncation``; the other families have no copied words, so ``alpha`` does not move them) beats the
real summary. The judge scores every text once (with its token log-probabilities, given the
source and without it); every point is then arithmetic on those.

    python experiments/copy_tradeoff.py --docs 20 --probe-docs 12    # ~10 min on 2 CPU cores (bf16)

(Measured when ``default`` was this reward, as ``copy_credit`` with ``contrast``; the config is now
``information``.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # _common.py and the benchmark scripts this study reuses
from _common import data_dir, summeval  # noqa: E402
from probe_summeval import summeval_pairs, wins_per_family  # noqa: E402

from judge_reward.guards import SourceStats, copied_token_mask, source_information  # noqa: E402
from judge_reward.metaeval.correlation import sample_level  # noqa: E402
from judge_reward.methods.base import Item  # noqa: E402
from judge_reward.probes import build_probes, other_items  # noqa: E402
from judge_reward.reward import Reward, RewardResult  # noqa: E402

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
FAMILIES = ("copy_source", "truncation")
ALPHAS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


class Terms:
    """What a point of the sweep needs from one rewarded text, weighted over the reward's aspects."""

    def __init__(self, reward: Reward, item: Item, result: RewardResult, sources: dict[str, SourceStats]):
        g = reward.config.information
        self.value = result.value
        self.others = sum(v for k, v in result.components.items() if k.startswith("guard/"))  # every charge
        source = sources.get(item.source) or sources.setdefault(item.source, SourceStats(item.source))
        text = result.judged_output if result.judged_output is not None else item.output
        weights, self.copied_in_budget, self.uncopied_in_budget, self.mean, self.copied_gain = 0.0, 0.0, 0.0, 0.0, 0.0
        for aspect in reward.aspects:
            score = result.scores.get(aspect.name)
            if score is None or score.value is None:
                continue
            cond, uncond = score.tokens.with_source, score.tokens.without_source
            mask = copied_token_mask(score.tokens.texts, " " + text.strip(), source, g.min_fragment, g.near_copy_words)
            gains = [c - u for c, u in zip(cond, uncond)]
            w = reward.weights[aspect.name]
            weights += w
            # the reward's own budgeted sum, over the copied tokens (mask inverted) and over the others
            self.copied_in_budget += w * source_information(cond, uncond, [not m for m in mask], g.budget_tokens)
            self.uncopied_in_budget += w * source_information(cond, uncond, mask, g.budget_tokens)
            self.mean += w * sum(cond) / len(cond)
            self.copied_gain += w * sum(x for x, m in zip(gains, mask) if m) / len(cond)
        self.term = result.components.get("term/information")
        if weights:
            self.copied_in_budget /= weights
            self.uncopied_in_budget /= weights
            self.mean /= weights
            self.copied_gain /= weights

    def information(self, alpha: float) -> float | None:
        return None if self.value is None else self.value + alpha * self.copied_in_budget

    def discounted_judge(self, alpha: float) -> float | None:
        return None if self.value is None else self.mean - (1 - alpha) * self.copied_gain - self.others


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="information", help="a judge config whose reward is the information term with a budget")
    parser.add_argument("--docs", type=int, default=20, help="SummEval documents for agreement (16 summaries each)")
    parser.add_argument("--probe-docs", type=int, default=12, help="SummEval articles for the probes")
    parser.add_argument("--max-source-words", type=int, default=400)
    args = parser.parse_args()
    reward = Reward.from_config(args.config)
    g = reward.config.information
    if reward.config.term != "information" or g.budget_tokens is None or g.grounded_only:
        raise SystemExit(f"error: {args.config}: needs reward.term information with budget_tokens (and not grounded_only)")

    rows = [r for doc in summeval(args.docs) for r in doc]
    system_items = [Item(r["system_output"], r["source"]) for r in rows]
    pairs = summeval_pairs(data_dir(None, "summeval", "summeval.json"), args.probe_docs, "reference", args.max_source_words)
    probe_items, labels = [], []
    for i, pair in enumerate(pairs):
        probe_items.append(pair)
        labels.append((i, "real"))
        for probe in build_probes(pair, other_items(pairs, i), reward.aspects, FAMILIES):
            probe_items.append(Item(probe.output, pair.source))
            labels.append((i, probe.family))
    start = time.perf_counter()
    sources: dict[str, SourceStats] = {}
    systems = [Terms(reward, it, r, sources) for it, r in zip(system_items, reward(system_items))]
    probes = [Terms(reward, it, r, sources) for it, r in zip(probe_items, reward(probe_items))]
    seconds = time.perf_counter() - start
    # the information recomputed here is the reward's own term
    off = max(abs(t.term - t.uncopied_in_budget) for t in systems + probes if t.value is not None)
    if off > 1e-6:
        raise SystemExit(f"error: the recomputed information differs from the reward's by {off:.2e}")

    groups = [r["doc_id"] for r in rows]
    human = {a: [r["scores"][a] for r in rows] for a in ASPECTS}

    def agreement(values) -> str:
        return " | ".join(f"{sample_level(values, human[a], groups, 'spearman'):.3f}" for a in ASPECTS)

    print(f"{args.config} reward ({reward.judge.backend.model_id}); agreement: first {args.docs} SummEval documents "
          f"({len(rows)} summaries); probes: first {len(pairs)} articles cut to {args.max_source_words} words, "
          f"{len(probe_items) - len(pairs)} probe texts; {seconds:.0f} s of judging\n")
    print("| reward | alpha | " + " | ".join(ASPECTS) + " | " + " | ".join(f"{f} wins" for f in FAMILIES) + " |")
    print("|---|---|" + "---|" * (len(ASPECTS) + len(FAMILIES)))
    n = len(pairs)
    mean_judge = [t.mean if t.value is not None else None for t in systems]
    print(f"| judge alone (mean over aspects) | - | {agreement(mean_judge)} | "
          + " | ".join(f"{w}/{n}" for w in wins_per_family([t.mean for t in probes], labels, FAMILIES).values()) + " |")
    for name, point in (("information + alpha x copied", Terms.information),
                        ("judge - (1 - alpha) x copy gain", Terms.discounted_judge)):
        for alpha in ALPHAS:
            values = [point(t, alpha) for t in systems]
            won = wins_per_family([point(t, alpha) for t in probes], labels, FAMILIES)
            print(f"| {name} | {alpha:g} | {agreement(values)} | " + " | ".join(f"{w}/{n}" for w in won.values()) + " |")


if __name__ == "__main__":
    main()
