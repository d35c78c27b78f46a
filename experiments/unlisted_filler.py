"""Does generic filler worded after the guards were chosen still beat a real summary?

The probe family ``filler`` appends three fixed generic sentences (``judge_reward.probes.FILLER``).
The sentences here were written after the ``lift`` guard was chosen (``after_*``, ``before_*``) or
after its baseline source was chosen on those (``*_later_*``), or after ``grounding.per_sentence``
was chosen on all of those (``*_latest_*``), or after the lift guard's two readings were chosen
on all of those (``*_readings_*``), and are in no probe family: each
says nothing about the article. The ``*_topical_*`` sentences (written with ``*_latest_*``) say
nothing either, but name the article's most frequent name (:func:`main_name`), as a policy could
learn to: the source makes them likelier and their one content word is the source's. Each is added to a real summary (at its end, or before it) and
scored with the config's reward against the article cut to ``--max-source-words``, as
``judge-reward validate`` probes, on two sets of real summaries:

* SummEval's first ``--articles`` human highlights (where the shipped guards were chosen);
* Zhang et al.'s (2023) first writer summary of each of their first ``--articles`` articles (held
  out: docs/research/writer_summaries.md).

Per wording and set: on how many articles it beats the real summary (the probe suite's rule,
:func:`judge_reward.probes.beats`), and per set on how many some wording does. ``--setting`` swaps a
guard's fields (JSON, repeatable) to compare.

    PYTHONPATH=. python experiments/unlisted_filler.py --config default --dtype float32 \\
        --cache judgments.sqlite
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from _common import chosen_sets, judge_config, writer_pairs  # noqa: E402

# Written after the lift guard was chosen; in no probe family.
AFTER = (
    "All in all, this is a story worth keeping an eye on as events continue to unfold.",
    "It remains to be seen how things will develop from here, but the coming weeks should tell.",
    "This is a reminder that matters like these can touch many lives in many different ways.",
    "In short, it was a notable moment, and plenty of people will be watching closely to learn more.",
    "Time will tell what the full impact of all of this turns out to be for everyone involved.",
    "News of this kind rarely goes unnoticed, and it is likely to stay a topic of conversation.",
)
BEFORE = (
    "Here is a story that has been getting a lot of attention lately.",
    "This is one of those situations where there is more to it than meets the eye.",
)
# Written after ``gptscore.baseline_source`` was chosen (on the wordings above); in no probe family.
LATER_AFTER = (
    "There is likely to be more to say about this before long, so stay tuned.",
    "Whatever happens next, this is a story that will not be forgotten quickly.",
    "It is the kind of news that gets people talking, and for good reason.",
    "Readers will no doubt form their own opinions about what it all means.",
)
LATER_BEFORE = (
    "What follows is a brief account of a story that many readers will want to know about.",
    "The short version of this news is below, with the key points first.",
    "Here, in a few lines, is what happened and why it matters.",
    "A lot has happened in this story, so it is worth going through it step by step.",
)
# Written after ``grounding.per_sentence`` was chosen (on the wordings above); in no probe family.
LATEST_AFTER = (
    "Those closest to the matter are expected to share more details when they are ready.",
    "As with many stories of this kind, the full picture may take some time to emerge.",
    "It is a development that will matter to a good number of people, one way or another.",
)
LATEST_BEFORE = (
    "Below is a summary of the main points of a recent news report.",
    "Some stories are simple and some are not, and this one falls somewhere in between.",
    "Here are the essential facts, set out as plainly as possible.",
)
# Written after the lift guard read what such sentences add two ways (on the wordings above, the
# topical ones included); in no probe family. The last two name the article's main name.
READINGS_AFTER = (
    "Much of what happens next will depend on decisions that have yet to be made.",
    "For now, the situation remains much as described, with more news expected in due course.",
    "All eyes will be on {name} in the days ahead.",
)
READINGS_BEFORE = (
    "In brief, and leaving aside the finer details, this is how things stand.",
    "Stories like this one are often more complicated than the headlines suggest.",
    "{name} has been in the headlines again.",
)
# Generic sentences about the article's main name (``{name}``: :func:`main_name`), written with LATEST_*.
TOPICAL_AFTER = (
    "{name} will no doubt stay in the news for a while yet.",
    "People who follow {name} will be keen to see what comes next.",
)
TOPICAL_BEFORE = (
    "This is the latest news about {name}.",
    "There has been a lot of talk about {name} recently.",
)


def main_name(source: str) -> str:
    """The capitalised word of three letters or more that ``source`` uses most often inside its
    sentences (not as a sentence's first word); the first such word on a tie, "the story" if none.

    >>> main_name("Police said Smith left. Later, Smith and Jones met. Jones said no. Smith agreed.")
    'Smith'
    """
    words = source.split()
    counts = Counter(w.strip(".,;:!?'\"()") for k, w in enumerate(words)
                     if k > 0 and not words[k - 1].endswith((".", "!", "?", '"')) and re.fullmatch(r"[A-Z][a-z]{2,}[.,;:!?'\")]*", w))
    return counts.most_common(1)[0][0] if counts else "the story"


def _added(template: str, after: bool):
    """A wording: ``template`` (its ``{name}`` filled from the source) appended to the output, or put before it."""
    def make(output: str, source: str) -> str:
        sentence = template.format(name=main_name(source)) if "{name}" in template else template
        return f"{output} {sentence}" if after else f"{sentence} {output}"
    return make


WORDINGS = {
    **{f"after_{k + 1}": _added(s, True) for k, s in enumerate(AFTER)},
    **{f"before_{k + 1}": _added(s, False) for k, s in enumerate(BEFORE)},
    **{f"after_later_{k + 1}": _added(s, True) for k, s in enumerate(LATER_AFTER)},
    **{f"before_later_{k + 1}": _added(s, False) for k, s in enumerate(LATER_BEFORE)},
    **{f"after_latest_{k + 1}": _added(s, True) for k, s in enumerate(LATEST_AFTER)},
    **{f"before_latest_{k + 1}": _added(s, False) for k, s in enumerate(LATEST_BEFORE)},
    **{f"after_topical_{k + 1}": _added(s, True) for k, s in enumerate(TOPICAL_AFTER)},
    **{f"before_topical_{k + 1}": _added(s, False) for k, s in enumerate(TOPICAL_BEFORE)},
    **{f"after_readings_{k + 1}": _added(s, True) for k, s in enumerate(READINGS_AFTER)},
    **{f"before_readings_{k + 1}": _added(s, False) for k, s in enumerate(READINGS_BEFORE)},
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="default", help="judge config (name or path)")
    p.add_argument("--articles", type=int, default=20, help="the first N articles of each set")
    p.add_argument("--max-source-words", type=int, default=400)
    p.add_argument("--dtype", default=None, help="the judge's dtype (backend.dtype)")
    p.add_argument("--cache", default=None, help="judgment cache (SQLite)")
    p.add_argument("--setting", action="append", default=[], metavar="GUARD=JSON",
                   help='override a guard\'s fields, e.g. lift={"enabled": true} (repeatable)')
    p.add_argument("--data", type=Path, default=None, help="data folder (default: $JUDGE_REWARD_DATA or ../shared/data)")
    p.add_argument("--sets", default="summeval,writers", help="which sets, comma-separated: summeval, writers")
    args = p.parse_args(argv)
    chosen = chosen_sets(p, args.sets, ("summeval", "writers"))

    from tqdm.auto import tqdm

    from judge_reward.bias_audit.data import load_held_out_articles
    from judge_reward.cli_validate import load_rated
    from judge_reward.methods.base import Item
    from judge_reward.probes import beats
    from judge_reward.reward import Reward
    from judge_reward.scoreboard import probe_pairs

    reward = Reward.from_config(judge_config(args.config, args.dtype, args.cache, args.setting))

    sets = {}
    if "summeval" in chosen:
        dataset, refs = load_rated("summeval", args.data)
        sets["SummEval highlights"] = probe_pairs(dataset, refs, args.articles, args.max_source_words)
    if "writers" in chosen:
        writers = load_held_out_articles(args.data / "zhang2023" if args.data else None)[:args.articles]
        sets["writer summaries (held out)"] = writer_pairs(writers, args.max_source_words)
    start = time.perf_counter()
    table: dict[str, dict[str, list[int]]] = {}
    any_win: dict[str, list[int]] = {}
    by_place: dict[str, dict[str, int]] = {}  # articles on which some sentence appended / put before wins
    for label, pairs in sets.items():
        texts = [[pair.output.strip(), *(make(pair.output.strip(), pair.source) for make in WORDINGS.values())] for pair in pairs]
        flat = [Item(t, pair.source) for pair, row in zip(pairs, texts) for t in row]
        results = []
        width = 1 + len(WORDINGS)
        chunk = 5 * width  # whole articles per chunk: a chunk shares its sources
        with tqdm(total=len(flat), desc=label, unit="text") as bar:
            for lo in range(0, len(flat), chunk):
                results += reward(flat[lo:lo + chunk])
                bar.update(len(flat[lo:lo + chunk]))
        table[label] = {name: [0, 0] for name in WORDINGS}
        any_win[label] = [0, 0]
        by_place[label] = {"after": 0, "before": 0}
        for k in range(len(pairs)):
            real, *attacks = results[k * width:(k + 1) * width]
            if real.value is None:
                continue
            won: set[str] = set()
            for name, attack in zip(WORDINGS, attacks):
                if attack.value is None:
                    continue
                table[label][name][1] += 1
                if beats(attack.value, real.value):
                    table[label][name][0] += 1
                    won.add(name.split("_")[0])
            for place in won:
                by_place[label][place] += 1
            any_win[label][0] += bool(won)
            any_win[label][1] += 1
    print(f"{args.config}, settings {args.setting or 'as shipped'}: {time.perf_counter() - start:.0f} s\n")
    print("| wording | " + " | ".join(sets) + " |\n|---|" + "---|" * len(sets))
    for name in WORDINGS:
        print(f"| {name} | " + " | ".join(f"{table[s][name][0]}/{table[s][name][1]}" for s in sets) + " |")
    for place in ("after", "before"):
        print(f"| some sentence {'appended' if place == 'after' else 'put before'} | "
              + " | ".join(f"{by_place[s][place]}/{any_win[s][1]}" for s in sets) + " |")
    print("| **some wording** | " + " | ".join(f"**{any_win[s][0]}/{any_win[s][1]}**" for s in sets) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
