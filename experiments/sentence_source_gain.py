"""Does the judge itself tell a sentence about the source from one that is not? Per-sentence source gain.

A guard that needs no word list would ask the judge: a sentence whose tokens are no likelier after
the source than without it (``with_source - without_source``, the information term's per-token gain,
:class:`judge_reward.methods.base.TokenLogprobs`) says nothing about the source: filler, a sign-off,
another item's output. This script measures that gain per sentence (the mean over the sentence's
tokens, nats per token) under the ``information`` config's judge (GPTScore with
``gptscore.unconditional: true``), for:

* SummEval's system outputs (``--docs`` articles x 16), and the first human highlight of each article
  (the source cut to ``--max-source-words``, as the probe runs);
* the probe suite's wordings built on those highlights (per wording: the share of highlights whose
  lowest-gain sentence is below 0);
* the unlisted chat wrappers of ``experiments/unlisted_wrappers.py`` (sets A-E).

A sentence needs ``--min-tokens`` tokens holding a letter or digit to count (a lone ``!`` or quote
mark is not a sentence). Offline from a warm cache: seconds; cold, about 3 s per text on 2 cores.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python experiments/sentence_source_gain.py --docs 20 --dtype float32 \\
        --cache judgments.sqlite
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "experiments"))

from _common import judge_config  # noqa: E402


def sentence_gains(result, output: str, min_tokens: int) -> list[tuple[str, float]]:
    """(sentence, mean gain per token) of each sentence of the text the judge read (``output``, or the
    injection guard's rewrite of it), averaged over the aspects. Tokens are placed on the text as the
    reward's token terms place them (:func:`judge_reward.guards.token_mask` on ``" " + text``)."""
    from judge_reward.guards import token_mask
    from judge_reward.sentences import sentence_spans

    readings = [score.tokens for score in result.scores.values()]
    if not readings or any(t is None or not t.texts for t in readings):
        return []
    text = " " + (result.judged_output or output).strip()
    pieces = readings[0].texts  # every aspect scores the same output tokens
    out = []
    for a, b in sentence_spans(text):
        picked = [k for k, inside in enumerate(token_mask(pieces, [(a, b)])) if inside]
        if sum(any(ch.isalnum() for ch in pieces[k]) for k in picked) >= min_tokens:
            gains = [np.mean([t.with_source[k] - t.without_source[k] for k in picked]) for t in readings]
            out.append((text[a:b].strip(), float(np.mean(gains))))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=20, help="the first N SummEval articles")
    p.add_argument("--max-source-words", type=int, default=400)
    p.add_argument("--aspects", nargs="+", default=["relevance"], help="the aspects whose readings are averaged")
    p.add_argument("--min-tokens", type=int, default=3)
    p.add_argument("--dtype", default=None, help="the judge's dtype (backend.dtype)")
    p.add_argument("--cache", default=None, help="judgment cache (SQLite)")
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $JUDGE_REWARD_DATA or ../shared/data)")
    args = p.parse_args(argv)

    from judge_reward.cli_validate import load_rated
    from judge_reward.methods.base import Item
    from judge_reward.probes import build_probes, other_items
    from judge_reward.reward import Reward
    from judge_reward.scoreboard import probe_pairs
    from unlisted_wrappers import WORDINGS

    cfg = judge_config("information", args.dtype, args.cache)
    cfg.reward["aspects"] = list(args.aspects)
    reward = Reward.from_config(cfg)
    dataset, refs = load_rated("summeval", args.data)
    groups = set(list(dict.fromkeys(r.group for r in dataset.records))[:args.docs])
    systems = [r.item for r in dataset.records if r.group in groups]
    pairs = probe_pairs(dataset, refs, args.docs, args.max_source_words)

    def gains(items) -> list[list[tuple[str, float]]]:
        return [sentence_gains(r, it.output, args.min_tokens) for r, it in zip(reward(items), items)]

    def lowest(per_text: list[list[tuple[str, float]]]) -> list[float | None]:
        return [min(g for _, g in found) if found else None for found in per_text]

    def quantiles(values) -> str:
        q = np.quantile(values, [0.01, 0.05, 0.1, 0.5])
        return " / ".join(f"{v:.2f}" for v in q)

    highlights = gains([Item(pair.output, pair.source) for pair in pairs])
    sys_sentences = [g for found in gains(systems) for _, g in found]
    hl_sentences = [g for found in highlights for _, g in found]
    print(f"information's judge, aspects {args.aspects}; {len(groups)} articles\n")
    print("| sentences of | n | gain quantiles .01 / .05 / .10 / .50 | share below 0 |\n|---|---|---|---|")
    for name, values in (("system outputs", sys_sentences), ("human highlights", hl_sentences)):
        print(f"| {name} | {len(values)} | {quantiles(values)} | {np.mean(np.array(values) < 0):.3f} |")
    highlight_low = lowest(highlights)

    rows = []
    for i, pair in enumerate(pairs):
        for probe in build_probes(pair, other_items(pairs, i), reward.aspects):
            rows.append(((probe.family, probe.variant), probe.output, pair.source))
    for set_name, wordings in WORDINGS.items():
        for name, template in wordings.items():
            for pair in pairs:
                rows.append(((f"wrapper set {set_name}", name), template.format(o=pair.output), pair.source))
    lows = lowest(gains([Item(t, src) for _, t, src in rows]))
    by: dict[tuple[str, str], list[float]] = {}
    for (key, _, _), low in zip(rows, lows):
        if low is not None:
            by.setdefault(key, []).append(low)
    print("\nLowest sentence gain per text (median), and the share of texts with a sentence below 0:\n")
    print("| family | wording | median lowest gain | share below 0 |\n|---|---|---|---|")
    valid = [v for v in highlight_low if v is not None]
    print(f"| (the highlight itself) | | {np.median(valid):.2f} | {np.mean(np.array(valid) < 0):.2f} |")
    for (family, variant), values in sorted(by.items()):
        print(f"| {family} | {variant} | {np.median(values):.2f} | {np.mean(np.array(values) < 0):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
