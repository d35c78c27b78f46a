"""Parsing fidelity: Chiang & Lee (2023) Topical-Chat correlations from their released outputs.

"A Closer Look into Automatic Evaluation Using Large Language Models" released 20 gpt-3.5-turbo
responses per Topical-Chat item, per aspect and prompt style (``gpt3.5_{asp}_{mode}.json``). This
script parses them with :func:`judge_reward.parsing.parse_rating`, scores each item by the mean of
its parsed ratings, and correlates with the human scores exactly as the paper does: Pearson r
over all items (dataset level) and Kendall tau per dialogue context, averaged over the contexts
where neither side is constant (:func:`judge_reward.metaeval.sample_level` skips exactly those
contexts, as the paper's ``all_eval.py`` does). Our table is printed beside the paper's.

Two readings of a decimal rating are shown:

* ``ours``: decimals kept (``2.5`` is 2.5), this project's parser as it is;
* ``paper reading``: only the integer part kept (``0.5`` -> 0, ``2.5`` -> 2). The released
  ``all_eval.py`` does this by accident: its clean-up regex can match the empty string, so it puts
  a space between every character and then reads the leading digits. It matters only where
  decimals are frequent (groundedness, answered ``0.5`` in up to 7% of responses).

Usage::

    python benchmarks/closer_look_parsing.py [--data /work/shared/data] [--json out.json]

Data: ``closer_look_topical_chat/`` and ``topical_chat/topical_chat.json`` under ``--data``
(default: ``$JUDGE_REWARD_DATA``, else ``../shared/data`` beside the repository).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from judge_reward.aspects import load_aspects
from judge_reward.data import DataNotFoundError, resolve_data_path
from judge_reward.metaeval import dataset_level, sample_level
from judge_reward.metaeval.datasets import load_topical_chat
from judge_reward.parsing import parse_samples

ASPECTS = {"nat": "naturalness", "coh": "coherence", "eng": "engagingness", "gro": "groundedness"}
# The released file modes and the prompt style (prompts.rating.STYLES) each one used.
MODE_STYLES = {
    "geval": "score_only",
    "geval_no_auto_cot": "score_only",
    "llm_eval_no_cot": "free_text",
    "rate_explain": "rate_explain",
    "rate_explain_auto_cot": "rate_explain",
    "analyze_rate": "analyze_rate",
    "analyze_rate_auto_cot": "analyze_rate",
}
DECIMALS = ("keep", "integer")

# Paper values (r, tau) that the released file of the same mode reproduces (Tables 1 and 3).
PAPER = {
    "geval": {"nat": (0.393, 0.358), "coh": (0.468, 0.391), "eng": (0.549, 0.513), "gro": (0.311, 0.566)},
    "geval_no_auto_cot": {"nat": (0.408, 0.331), "coh": (0.443, 0.404), "eng": (0.557, 0.535), "gro": (0.358, 0.582)},
    "llm_eval_no_cot": {"nat": (0.464, 0.476), "coh": (0.524, 0.426), "eng": (0.611, 0.557), "gro": (0.563, 0.666)},
    "rate_explain_auto_cot": {"nat": (0.554, 0.478), "coh": (0.512, 0.429), "eng": (0.613, 0.566), "gro": (0.555, 0.664)},
}
# Table 2 lists two rows that no file of their name reproduces. Both come from the
# ``analyze_rate`` files: "rate-explain" is their dataset-level r with per-context tau, and
# "analyze-rate" is their per-context Pearson r with the same tau (the README's "Method 2").
PAPER_TABLE2 = {
    "rate-explain": {"nat": (0.524, 0.47), "coh": (0.477, 0.416), "eng": (0.567, 0.524), "gro": (0.58, 0.693)},
    "analyze-rate": {"nat": (0.573, 0.47), "coh": (0.486, 0.416), "eng": (0.628, 0.524), "gro": (0.725, 0.693)},
}
# Rows we do not match, and why (see docs/rating.md).
NOTES = {
    ("geval", "gro"): "the paper's tau counts 10 responses its parser misreads as 2-9 on the 0-1 scale "
    "(9 echo the input: 'Fact: 84 per cent ...' -> 8); read in-scale, its own code gives 0.315/0.585",
}
# Which released file and which Pearson level reproduces each Table 2 row.
TABLE2_SOURCES = {"rate-explain": ("analyze_rate", "dataset"), "analyze-rate": ("analyze_rate", "sample")}


@dataclass
class FileResult:
    """Correlations and parse health of one released file under one reading of decimals."""

    file: str
    aspect: str
    mode: str
    decimals: str
    items: int
    responses: int
    failed: int
    items_without_rating: int
    pearson: float  # dataset level
    kendall: float  # per context, averaged
    sample_pearson: float  # per context, averaged (Table 2's "analyze-rate" row)
    failure_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def failure_rate(self) -> float:
        return self.failed / self.responses if self.responses else math.nan


def human_index(data_dir: Path):
    """Topical-Chat records keyed by (dialogue history, system id), the alignment the paper implies."""
    dataset = load_topical_chat(data_dir / "topical_chat" / "topical_chat.json")
    index = {}
    for rec in dataset.records:
        key = (rec.item.source, rec.system)
        if key in index:
            raise ValueError(f"topical_chat.json: two records for system {rec.system!r} in context {rec.group}")
        index[key] = rec
    return index


def file_path(data_dir: Path, asp: str, mode: str) -> Path:
    return data_dir / "closer_look_topical_chat" / f"gpt3.5_{asp}_{mode}.json"


@lru_cache(maxsize=None)
def _aspect(name: str):
    return load_aspects("topical_chat").get(name)


def evaluate_file(path: Path, index: dict) -> dict[str, FileResult]:
    """Parse one released file once; correlate its item scores with the human scores under
    each reading of decimals (keyed by :data:`DECIMALS`)."""
    asp, _, mode = path.stem.removeprefix("gpt3.5_").partition("_")
    if asp not in ASPECTS or mode not in MODE_STYLES:
        raise ValueError(f"{path.name}: not a gpt3.5_<asp>_<mode>.json file of the release")
    aspect = _aspect(ASPECTS[asp])
    records = json.loads(path.read_text())
    ratings_per_item, human, groups = [], [], []
    responses = failed = 0
    reasons: dict[str, int] = {}
    seen = set()
    for i, rec in enumerate(records):
        key = (rec.get("source"), rec.get("system_id"))
        if key not in index:
            raise ValueError(f"{path.name}: record {i} (system {key[1]!r}) has no match in topical_chat.json")
        if key in seen:
            raise ValueError(f"{path.name}: record {i} repeats an item (system {key[1]!r})")
        seen.add(key)
        texts = rec["all_responses"]
        samples = parse_samples(texts, aspect.scale, MODE_STYLES[mode])
        responses += len(texts)
        failed += samples.failed
        for reason, n in samples.failure_reasons.items():
            reasons[reason] = reasons.get(reason, 0) + n
        ratings_per_item.append(samples.ratings)
        human.append(index[key].human[aspect.name])
        groups.append(index[key].group)

    out = {}
    for decimals in DECIMALS:
        metric = []
        for ratings in ratings_per_item:
            if decimals == "integer":
                ratings = [float(math.trunc(v)) for v in ratings]
            metric.append(sum(ratings) / len(ratings) if ratings else None)  # None: dropped, not 0
        out[decimals] = FileResult(
            file=path.name,
            aspect=asp,
            mode=mode,
            decimals=decimals,
            items=len(records),
            responses=responses,
            failed=failed,
            items_without_rating=sum(1 for r in ratings_per_item if not r),
            pearson=dataset_level(metric, human, "pearson"),
            kendall=sample_level(metric, human, groups, "kendall"),
            sample_pearson=sample_level(metric, human, groups, "pearson"),
            failure_reasons=dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        )
    return out


def evaluate_all(data_dir: Path) -> dict[tuple[str, str, str], FileResult]:
    """Every released file under both readings of decimals, keyed by (asp, mode, decimals)."""
    index = human_index(data_dir)
    out = {}
    for mode in MODE_STYLES:
        for asp in ASPECTS:
            for decimals, result in evaluate_file(file_path(data_dir, asp, mode), index).items():
                out[(asp, mode, decimals)] = result
    return out


def _pair(r: float, tau: float) -> str:
    return f"{r:.3f}/{tau:.3f}"


def _delta(ours: tuple[float, float], paper: tuple[float, float]) -> str:
    worst = max(abs(ours[0] - paper[0]), abs(ours[1] - paper[1]))
    return f"{worst:.3f}" + (" ok" if worst <= 0.01 else " MISS")


def render(results: dict[tuple[str, str, str], FileResult]) -> str:
    lines = [
        "Chiang & Lee (2023), Topical-Chat, gpt-3.5-turbo, 20 samples: r = Pearson over all items, "
        "tau = Kendall per context, averaged",
        "ours = decimals kept; paper reading = integer part only (as the released all_eval.py reads 0.5, 2.5)",
        "",
        f"{'file':<40} {'fail':>6} {'rate':>6}  {'ours r/tau':>11}  {'paper reading':>13}  {'paper':>11}  max|diff|",
    ]
    for mode in MODE_STYLES:
        for asp in ASPECTS:
            keep, integer = results[(asp, mode, "keep")], results[(asp, mode, "integer")]
            paper = PAPER.get(mode, {}).get(asp)
            ours_int = (integer.pearson, integer.kendall)
            lines.append(
                f"{keep.file:<40} {keep.failed:>6} {keep.failure_rate:>6.2%}  {_pair(keep.pearson, keep.kendall):>11}"
                f"  {_pair(*ours_int):>13}  {(_pair(*paper) if paper else '-'):>11}  {_delta(ours_int, paper) if paper else ''}"
            )
    for (mode, asp), note in NOTES.items():
        lines.append(f"  note gpt3.5_{asp}_{mode}.json: {note}")
    lines += ["", "Table 2 rows that the files of their own name do not reproduce, beside the file that does (paper reading):"]
    for row, values in PAPER_TABLE2.items():
        mode, level = TABLE2_SOURCES[row]
        for asp, paper in values.items():
            res = results[(asp, mode, "integer")]
            ours = (res.pearson if level == "dataset" else res.sample_pearson, res.kendall)
            lines.append(
                f"  Table 2 {row:<13} {asp}: paper {_pair(*paper)}  {res.file} ({level}-level r) "
                f"{_pair(*ours)}  {_delta(ours, paper)}"
            )
    worst = max(results.values(), key=lambda r: r.failure_rate)
    total = sum(r.responses for r in results.values() if r.decimals == "keep")
    failed = sum(r.failed for r in results.values() if r.decimals == "keep")
    lines += [
        "",
        f"parse failures: {failed} of {total} responses ({failed / total:.2%}); "
        f"worst file {worst.file} {worst.failure_rate:.2%} (top reasons: {dict(list(worst.failure_reasons.items())[:3])})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="shared data folder (default: $JUDGE_REWARD_DATA, ../shared/data)")
    parser.add_argument("--json", type=Path, default=None, help="also write every FileResult here")
    args = parser.parse_args(argv)
    try:
        data = resolve_data_path(args.data, what="--data")
    except DataNotFoundError as err:
        parser.error(str(err))
    if not (data / "closer_look_topical_chat").is_dir():
        parser.error(f"--data {data}: no closer_look_topical_chat/ folder there (set JUDGE_REWARD_DATA)")
    results = evaluate_all(data)
    print(render(results))
    if args.json is not None:
        rows = [{**asdict(r), "failure_rate": r.failure_rate} for r in results.values()]
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
