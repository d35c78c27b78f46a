"""Do truncations worded after the ending guard was chosen still beat the real summary?

``default``'s ending guard (``mode: judge``, ``end_probability`` 0.1) was chosen with the probe
family ``truncation`` on SummEval's first 60 highlights (the first 20 and the 40 after them:
``experiments/ending_judge.py``). The wordings here were written after that choice and are not in
the probe suite: each cuts the highlight inside a sentence in a way the suite does not. Each is
scored with the config's reward against the highlight (the source cut to ``--max-source-words``,
as ``judge-reward validate`` probes) on three slices of articles: the first 20 (where every guard
was chosen), 20-60 (seen when the threshold was chosen) and 60-100 (held out).

Per wording and slice: on how many articles it beats the highlight (the probe suite's rule,
:func:`judge_reward.probes.beats`), and, per slice, on how many some wording does. ``--setting``
swaps the ending guard's fields (JSON) to compare, e.g. the text rule that was shipped before.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python experiments/unlisted_truncations.py --dtype float32 \\
        --cache .cache/ending/default_fp32.sqlite --setting '{"mode": "cut"}'
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _common import judge_config  # noqa: E402


def _cut(text: str, n: int) -> str:
    from judge_reward.probes import _cut_inside_sentence

    return _cut_inside_sentence(text, n)


def _to_last_comma(o: str) -> str | None:
    at = o.rstrip().rfind(",")
    return o[:at].rstrip() if at > 0 else None


def _sentences_then(o: str, keep: int) -> str | None:
    from judge_reward.sentences import sentences

    parts = sentences(o)
    if len(parts) < 2:
        return None
    last = parts[-1].split()
    return " ".join(parts[:-1] + last[:keep]) if len(last) > keep else None


def _first_sentence_half(o: str) -> str | None:
    from judge_reward.sentences import sentences

    parts = sentences(o)
    first = parts[0].split() if parts else []
    return _cut(parts[0], len(first) // 2) if len(parts) >= 2 and len(first) >= 6 else None


# Written after end_probability 0.1 was chosen; run once per setting.
WORDINGS = {
    "two_thirds_words": lambda o: _cut(o, (2 * len(o.split())) // 3),
    "three_quarters_words": lambda o: _cut(o, (3 * len(o.split())) // 4),
    "all_but_last_word": lambda o: _cut(o, len(o.split()) - 2) if len(o.split()) > 4 else None,
    "to_last_comma": _to_last_comma,
    "last_sentence_three_words": lambda o: _sentences_then(o, 3),
    "first_sentence_half": _first_sentence_half,
}

SLICES = ((0, 20, "first 20 (guards chosen)"), (20, 60, "20-60 (threshold chosen)"), (60, 100, "60-100 (held out)"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="judge config (name or path)")
    p.add_argument("--docs", type=int, default=100, help="the first N SummEval articles")
    p.add_argument("--max-source-words", type=int, default=400)
    p.add_argument("--dtype", default=None, help="the judge's dtype (backend.dtype)")
    p.add_argument("--cache", default=None, help="judgment cache (SQLite)")
    p.add_argument("--setting", default=None, help="JSON fields that replace the ending guard's, e.g. '{\"mode\": \"cut\"}'")
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $JUDGE_REWARD_DATA or ../shared/data)")
    args = p.parse_args(argv)

    from judge_reward.cli_validate import load_rated
    from judge_reward.methods.base import Item
    from judge_reward.probes import beats
    from judge_reward.reward import Reward
    from judge_reward.scoreboard import probe_pairs

    cfg = judge_config(args.config, args.dtype, args.cache)
    if args.setting:
        cfg.reward["guards"]["ending"] = {**cfg.reward["guards"]["ending"], **json.loads(args.setting)}
    ending = cfg.reward["guards"]["ending"]
    reward = Reward.from_config(cfg)
    dataset, refs = load_rated("summeval", args.data)
    pairs = probe_pairs(dataset, refs, args.docs, args.max_source_words)
    texts: dict[tuple[str, str], None] = {}
    built = []
    for pair in pairs:
        mine = {name: make(pair.output.strip()) for name, make in WORDINGS.items()}
        built.append({k: v for k, v in mine.items() if v and v.strip() and v.strip() != pair.output.strip()})
        for text in [pair.output, *built[-1].values()]:
            texts.setdefault((text, pair.source), None)
    start = time.perf_counter()
    from tqdm.auto import tqdm

    keys = list(texts)
    results = {}
    with tqdm(total=len(keys), desc="truncations", unit="text") as bar:
        for lo in range(0, len(keys), 64):  # the keys run source by source: each chunk shares its sources
            chunk = keys[lo:lo + 64]
            results.update(zip(chunk, reward([Item(t, s) for t, s in chunk])))
            bar.update(len(chunk))
    print(f"{args.config}, ending guard {json.dumps(ending)}: {len(pairs)} SummEval highlights, "
          f"{len(keys)} texts in {time.perf_counter() - start:.0f} s\n")
    print("| wording | " + " | ".join(label for _, _, label in SLICES) + " |\n|---|" + "---|" * len(SLICES))
    rows = {name: [[0, 0] for _ in SLICES] for name in WORDINGS}
    any_win = [[0, 0] for _ in SLICES]
    for i, pair in enumerate(pairs):
        real = results[(pair.output, pair.source)].value
        s = next((k for k, (lo, hi, _) in enumerate(SLICES) if lo <= i < hi), None)
        if real is None or s is None:
            continue
        won = False
        for name, text in built[i].items():
            value = results[(text, pair.source)].value
            if value is None:
                continue
            rows[name][s][1] += 1
            if beats(value, real):
                rows[name][s][0] += 1
                won = True
        any_win[s][0] += won
        any_win[s][1] += 1
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(f"{w}/{n}" for w, n in cells) + " |")
    print("| **some wording** | " + " | ".join(f"**{w}/{n}**" for w, n in any_win) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
