"""The reward scoreboard: validity and robustness of one reward, side by side.

A reward has two jobs. It must rank real outputs the way people do (*validity*), and no cheap
manipulation may score above a real answer (*robustness*). :func:`validate` measures both on a
human-rated data set, with exactly the reward a trainer gets (:class:`~judge_reward.reward.Reward`):

* **agreement**: summary-level (per input, then averaged) and dataset-level Spearman / Kendall /
  Pearson of the reward with each human aspect, with bootstrap CIs over inputs, beside the judge
  alone (each aspect's own score, and the unguarded weighted mean the reward starts from), output
  length alone and ROUGE where the data has references;
* **selection**: what maximising the reward picks among an input's real outputs, as the normalised
  gain ``(rating of the pick - mean rating) / (best rating - mean rating)`` (1: the best output, 0:
  no better than a random pick), for the reward, the judge alone, the longest and the shortest output;
* **damage**: copies of real outputs made worse on purpose (:mod:`judge_reward.damage`); the share
  the reward scores below the original, per family (a valid reward notices damage);
* **attacks**: the probe suite (:mod:`judge_reward.probes`) against the data's human references,
  its wordings split into attacks and fair outputs (the source's lead within the length budget is
  a fair summary); the share of inputs on which an attack family beats the real output;
* **guard cost**: per guard, the share of honest outputs (the rated system outputs and the human
  references) it charges, and the reward's agreement with and without it.

``validate`` reads every judgment through the judge's cache, so with ``cache.path`` set a second
run replays from disk in seconds (a guard change needs no judge call).

>>> round(normalised_gain([1.0, 2.0, 3.0, 6.0], pick=2), 3)   # mean 3, best 6: the pick is average
0.0
>>> normalised_gain([1.0, 2.0, 3.0, 6.0], pick=3)
1.0
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from .guards import words
from .methods.base import Item

SELECTORS = ("reward", "judge", "longest", "shortest")
"""What picks an input's top output in the selection table (a random pick has gain 0 by definition)."""

@dataclass(frozen=True)
class RatedSet:
    """A human-rated set the scoreboard reads: where it is, and what it is for."""

    loader: str
    """Its loader (:func:`~judge_reward.metaeval.datasets.load_dataset` kind)."""
    file: str
    """Its file under the data folder."""
    references: Optional[str]
    """A file of human references per input; None: the records carry them (data-to-text's
    references, Topical-Chat's human responses)."""
    aspect_files: tuple[str, ...]
    """The aspect files whose task fits it (``validate`` runs a config on the sets that fit)."""
    task: str
    """What its outputs do; it decides which probe wordings are fair outputs (:func:`probes.is_fair`)."""
    output_only_aspects: tuple[str, ...]
    """The human aspects whose raters judged the text by itself (their annotation questions need no
    source): what a reward that reads no source is measured against."""


DATASETS = {
    # SummEval's consistency and relevance are judged against the article
    "summeval": RatedSet("summeval", "summeval/summeval.json", "summeval/references.json",
                         ("summeval", "gptscore_summarization", "open_ended"), "summarization",
                         ("coherence", "fluency")),
    # Topical-Chat's coherence, groundedness and understandability "in the context of the history"
    # (USR's instructions): against the history and the fact
    "topical_chat": RatedSet("topical_chat", "topical_chat/topical_chat.json", None,
                             ("topical_chat", "gptscore_dialogue", "open_ended"), "dialogue",
                             ("naturalness", "engagingness")),
    # informativeness: against the dialogue act
    "bagel": RatedSet("d2t", "d2t/bagel.json", None, ("gptscore_data_to_text",), "data_to_text",
                      ("naturalness", "quality")),
    "sfres": RatedSet("d2t", "d2t/sfres.json", None, ("gptscore_data_to_text",), "data_to_text",
                      ("naturalness", "quality")),
}


@dataclass
class ScoreboardSettings:
    """How much of a data set each part of :func:`validate` reads.

    Attributes:
        groups: inputs (SummEval documents, dialogue contexts) for agreement and selection; None: all.
        damage_per_group: outputs per input that get damaged copies (chosen with ``seed``); None: all.
        damage_groups: inputs whose outputs are damaged; None: the same as ``groups``.
        probe_groups: inputs probed with their human reference (or, without one, the output people rated
            best) as the real output (0: no attacks).
        probe_offset: skip this many inputs before the probed ones (probe held-out inputs after
            guards were chosen on the first ones).
        max_source_words: cut each probed source to this many words (what a training prompt holds).
        n_bootstrap: bootstrap resamples of inputs for the CIs (0: none).
        seed: seed of the damage sample, the damage texts and the bootstrap.
    """

    groups: Optional[int] = None
    damage_per_group: Optional[int] = 2
    damage_groups: Optional[int] = None
    probe_groups: int = 20
    probe_offset: int = 0
    max_source_words: Optional[int] = 400
    n_bootstrap: int = 1000
    seed: int = 0


# -- statistics -------------------------------------------------------------------------------------


def normalised_gain(ratings: Sequence[float], pick: int) -> float | None:
    """``(ratings[pick] - mean) / (max - mean)``: 1 when the pick is the best-rated output, 0 when it
    is rated like the average (what a random pick gets in expectation), below 0 when worse; ``None``
    when every output is rated the same."""
    r = np.asarray(ratings, dtype=float)
    spread = r.max() - r.mean()
    if spread <= 1e-12:
        return None
    return float((r[pick] - r.mean()) / spread)


def top_pick(values: Sequence[float | None]) -> int | None:
    """Index of the highest value (the first on ties), ignoring ``None``; None when all are None."""
    best = None
    for k, v in enumerate(values):
        if v is not None and math.isfinite(v) and (best is None or v > values[best]):
            best = k
    return best


def mean_ci(values: Sequence[float], n_bootstrap: int, seed: int, confidence: float = 0.95) -> list[float | None]:
    """Percentile bootstrap interval of the mean (scipy.stats.bootstrap); [None, None] when it cannot be had."""
    values = [v for v in values if v is not None]
    if n_bootstrap <= 0 or len(values) < 2 or len(set(values)) < 2:
        return [None, None]
    from scipy.stats import bootstrap

    res = bootstrap((np.asarray(values, dtype=float),), np.mean, n_resamples=n_bootstrap, confidence_level=confidence,
                    method="percentile", random_state=seed)
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def selection(groups: Sequence[str], ratings: Sequence[float], pickers: dict[str, Sequence[float | None]],
              n_bootstrap: int = 0, seed: int = 0) -> dict[str, dict]:
    """Per picker, the mean normalised gain of its top pick over the groups (inputs), its CI, and the
    mean rating of the picks beside the mean of all outputs and of the best ones.

    >>> out = selection(["a", "a", "b", "b"], [1, 5, 2, 4], {"m": [0.1, 0.9, 0.5, 0.2]})
    >>> out["m"]["gain"], out["m"]["groups"]
    (0.0, 2)
    """
    by_group = _indices_by_group(groups)
    out = {}
    for name, values in pickers.items():
        gains, picked, means, bests, skipped = [], [], [], [], 0
        for idx in by_group.values():
            r = [float(ratings[k]) for k in idx]
            pick = top_pick([values[k] for k in idx])
            gain = normalised_gain(r, pick) if pick is not None else None
            if gain is None:
                skipped += 1
                continue
            gains.append(gain)
            picked.append(r[pick])
            means.append(float(np.mean(r)))
            bests.append(max(r))
        out[name] = {
            "gain": float(np.mean(gains)) if gains else None,
            "gain_ci": mean_ci(gains, n_bootstrap, seed),
            "pick_rating": float(np.mean(picked)) if picked else None,
            "mean_rating": float(np.mean(means)) if means else None,
            "best_rating": float(np.mean(bests)) if bests else None,
            "groups": len(gains), "skipped": skipped,
        }
    return out


def share_below(pairs: Sequence[tuple[float | None, float | None]]) -> dict:
    """Of (original, damaged) value pairs, the share where the damaged copy scores strictly lower;
    pairs with a ``None`` on either side are counted apart (``unscored``), never as a detection."""
    scored = [(a, b) for a, b in pairs if a is not None and b is not None]
    below = [b < a for a, b in scored]
    return {
        "n": len(scored), "below": int(sum(below)),
        "share_below": float(np.mean(below)) if below else None,
        "mean_drop": float(np.mean([a - b for a, b in scored])) if scored else None,
        "unscored": len(pairs) - len(scored),
    }


def judge_spread(groups: Sequence[str], values: Sequence[float | None]) -> float | None:
    """The judge's spread on honest outputs: the median over inputs of the standard deviation
    (``ddof=0``) of its values among the input's rated outputs (inputs with two or more values).
    What ``reward.units: spread`` measures guard strengths in (``validated_with.spread``).

    >>> judge_spread(["a", "a", "b", "b", "b"], [1.0, 3.0, 0.0, 0.0, None])
    0.5
    """
    per_group: dict[str, list[float]] = {}
    for g, v in zip(groups, values):
        if v is not None:
            per_group.setdefault(g, []).append(v)
    stds = [float(np.std(v)) for v in per_group.values() if len(v) >= 2]
    return float(np.median(stds)) if stds else None


def judge_alone(result, weights: dict[str, float]) -> float | None:
    """The reward's starting point before any guard: the weighted mean of its normalised aspect values."""
    got = {n[len("aspect/"):]: v for n, v in result.components.items() if n.startswith("aspect/")}
    if not got or (len(got) < len(weights) and result.value is None):  # a failed aspect: no judge value either
        return None
    mass = sum(weights[n] for n in got if n in weights)
    return sum(weights[n] * v for n, v in got.items() if n in weights) / mass if mass > 0 else None


# -- the run ----------------------------------------------------------------------------------------


@dataclass
class Scoreboard:
    """What :func:`validate` measured for one reward config on one data set (JSON-ready)."""

    config: str
    dataset: str
    reward: dict
    agreement: dict = field(default_factory=dict)
    selection: dict = field(default_factory=dict)
    damage: dict = field(default_factory=dict)
    attacks: dict = field(default_factory=dict)
    guard_cost: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    # headline numbers, for the gate and the validity-robustness figure
    def reward_agreement(self, level: str = "sample", method: str = "spearman") -> dict[str, float]:
        return {a: cells[f"{level}/{method}"]["value"] for a, cells in self.agreement.get("reward", {}).items()}

    def judge_agreement(self, level: str = "sample", method: str = "spearman") -> dict[str, float]:
        return {a: cells[f"{level}/{method}"]["value"] for a, cells in self.agreement.get("judge", {}).items()}

    @property
    def validity(self) -> float | None:
        """Mean over aspects of the reward's summary-level Spearman with people."""
        vals = [v for v in self.reward_agreement().values() if v is not None and math.isfinite(v)]
        return float(np.mean(vals)) if vals else None

    @property
    def max_attack_win_rate(self) -> float | None:
        rates = [f["win_rate"] for f in self.attacks.get("families", {}).values() if f["win_rate"] is not None]
        return max(rates) if rates else None

    @property
    def min_damage_share(self) -> float | None:
        shares = [f["reward"]["share_below"] for f in self.damage.get("families", {}).values()
                  if f["reward"]["share_below"] is not None]
        return min(shares) if shares else None

    def failures(self, min_agreement: float | None = None, max_win_rate: float | None = None,
                 min_damage: float | None = None) -> list[str]:
        """What fails the gate, one line each (empty: it passes)."""
        out = []
        if min_agreement is not None:
            for aspect, v in self.reward_agreement().items():
                if v is None or not v >= min_agreement:
                    out.append(f"{self.dataset}: agreement with {aspect} {_f(v)} < {min_agreement}")
        if max_win_rate is not None:
            for fam, f in self.attacks.get("families", {}).items():
                if f["win_rate"] is not None and f["win_rate"] > max_win_rate:
                    out.append(f"{self.dataset}: attack {fam} wins {f['win_rate']:.2f} > {max_win_rate}")
        if min_damage is not None:
            for fam, f in self.damage.get("families", {}).items():
                s = f["reward"]["share_below"]
                if s is not None and s < min_damage:
                    out.append(f"{self.dataset}: damage {fam} noticed {s:.2f} < {min_damage}")
        return out

    def to_markdown(self) -> str:
        return render_markdown(self)


def _f(x, digits: int = 3, sign: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _group_order(groups: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(groups))


def _indices_by_group(groups: Sequence[str]) -> dict[str, list[int]]:
    """Group -> the indices of its items, groups in first-seen order."""
    by_group: dict[str, list[int]] = {}
    for k, g in enumerate(groups):
        by_group.setdefault(g, []).append(k)
    return by_group


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="text", disable=not enabled)


def _score(reward, items: Sequence[Item], desc: str, progress: bool, per_call: int = 48):
    """``reward(items)`` in calls of items that share sources (the backend runs a shared source once)."""
    order = sorted(range(len(items)), key=lambda k: (items[k].source, k))
    results: list = [None] * len(items)
    with _progress(len(items), desc, progress) as bar:
        for lo in range(0, len(order), per_call):
            idx = order[lo:lo + per_call]
            got = reward([items[k] for k in idx])
            for k, r in zip(idx, got):
                results[k] = r
            bar.update(len(idx))
    return results


def _agreement(metrics: dict, human: dict, groups: Sequence[str], n_bootstrap: int, seed: int) -> dict:
    from .metaeval.report import MetaEvalConfig, evaluate

    config = MetaEvalConfig(levels=("sample", "dataset"), n_bootstrap=n_bootstrap, seed=seed, compare=False)
    report = evaluate(metrics, human, list(groups), config=config)
    out: dict[str, dict] = {}
    for res in report.results:
        cells = out.setdefault(res.metric, {}).setdefault(res.aspect, {})
        for c in res.cells:
            cells[f"{c.level}/{c.method}"] = {
                "value": _clean(c.value), "ci": [_clean(c.ci_low), _clean(c.ci_high)], "n": c.n}
    return out


def _clean(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def validate(reward, dataset, settings: ScoreboardSettings = ScoreboardSettings(), config_name: str = "",
             references: Optional[dict[str, Sequence[str]]] = None, progress: bool = True) -> Scoreboard:
    """Measure ``reward`` (a :class:`~judge_reward.reward.Reward`) on ``dataset`` (a
    :class:`~judge_reward.metaeval.datasets.MetaEvalDataset` with human ratings).

    ``references``: group -> human references (the SummEval highlights, Topical-Chat's human
    responses); with them ROUGE joins the agreement table (against a record's own references where
    it carries them, so that a human response is not scored against itself), the references join
    the guard-cost sample, and the first ``probe_groups`` groups are probed with their first
    reference as the real output. Without them the probes' real output is the output people rated
    best for each input (:func:`best_rated`).
    """
    start = time.perf_counter()
    reward.use_inputs([it.source for it in dataset.items if it.source])  # the task's data: every input of the set
    data = dataset.first_groups(settings.groups)
    problem = probe_range_problem(len(set(data.groups)), settings)
    if problem:
        raise ValueError(problem)
    # A reward that reads no source (open-ended aspects) is measured as it will be used: given the
    # outputs alone, against the ratings of the text by itself.
    withhold = not getattr(reward, "reads_source", True)
    items = [Item(it.output, "", it.reference, it.id) for it in data.items] if withhold else data.items
    groups = data.groups
    aspects = list(data.aspects)
    if withhold:
        known = DATASETS.get(data.name)
        aspects = [a for a in aspects if a in (known.output_only_aspects if known else aspects)]
    human = {a: data.human(a) for a in aspects}
    board = Scoreboard(config_name, data.name, {**reward.describe(), "guards": list(reward.guards.enabled)})
    board.meta.update(n_items=len(items), n_groups=len(_group_order(groups)), settings=asdict(settings))
    if withhold:
        board.meta["source"] = {"withheld": True, "aspects": aspects,
                                "aspects_left_out": [a for a in data.aspects if a not in aspects]}

    # 1. the reward and the judge on every rated output
    results = _score(reward, items, f"{data.name}: rated outputs", progress)
    rewards = [r.value for r in results]
    judge = [judge_alone(r, reward.weights) for r in results]
    per_aspect = {a: [(r.scores[a].value if a in r.scores and r.scores[a].value is not None else None)
                      for r in results] for a in reward.aspect_names}
    lengths = [float(len(words(it.output))) for it in items]
    board.meta["judge_spread"] = judge_spread(groups, judge)
    metrics: dict[str, Any] = {"reward": rewards, "judge_mean": judge, "length": lengths}
    judged_aspects = {a: per_aspect[a] for a in aspects if a in per_aspect}
    if judged_aspects:
        metrics["judge"] = judged_aspects
    if references and not all(rec.references or references.get(rec.group) for rec in data.records):
        board.meta["rouge"] = "not computed: some inputs have no reference"
    elif references:
        try:
            from .metaeval.rouge import rouge_scores

            # a record's own references where it carries them: a human response is not its own reference
            metrics["rouge1"] = rouge_scores([it.output for it in items],
                                             [list(rec.references or references[rec.group])
                                              for rec in data.records])["rouge1"]
        except ImportError:  # rouge-score is the metaeval extra
            board.meta["rouge"] = "not computed: pip install 'judge-reward[metaeval]'"
    board.agreement = _agreement(metrics, human, groups, settings.n_bootstrap, settings.seed)
    failures: dict[str, int] = {}
    for r in results:
        if r.value is None:
            failures[r.reason or "unknown"] = failures.get(r.reason or "unknown", 0) + 1
    board.meta["reward_failures"] = failures

    # 2. selection: what maximising each picker chooses among an input's rated outputs
    pickers = {"reward": rewards, "judge": judge, "longest": lengths, "shortest": [-x for x in lengths]}
    board.selection = {a: selection(groups, human[a], pickers, settings.n_bootstrap, settings.seed) for a in aspects}

    # 3. damage
    board.damage = _damage(reward, data, results, settings, progress, withhold)

    # 4. attacks: the probe suite on the human references; a set without them is probed on the
    # output people rated best for each input (no manipulation of it may score above it)
    judged_references: list[dict] = []
    if settings.probe_groups:
        board.attacks, real = _attacks(reward, data, references or best_rated(data, aspects), settings, progress,
                                       withhold)
        board.attacks["real_output"] = "reference" if references else "best_rated"
        if references:
            judged_references = real

    # 5. guard cost
    board.guard_cost = _guard_cost(reward, items, results, human, groups, references, judged_references)
    board.meta["seconds"] = time.perf_counter() - start
    stats = getattr(getattr(reward, "judge", None), "stats", None)
    if callable(stats):
        s = stats()
        board.meta["judge_cache"] = {"hits": s.get("cache_hits"), "misses": s.get("cache_misses")}
    return board


def best_rated(data, aspects: Sequence[str]) -> dict[str, list[str]]:
    """Per input (group), the output people rated best: the highest mean rating over ``aspects``
    (the first of a tie), as a one-text list in the shape of the references.

    >>> from judge_reward.metaeval.datasets import HumanRatedItem, MetaEvalDataset
    >>> rated = [HumanRatedItem(Item(text), {"q": q}, "g", "sys") for text, q in (("a", 2.0), ("b", 4.0), ("c", 4.0))]
    >>> best_rated(MetaEvalDataset("x", rated, ("q",)), ["q"])
    {'g': ['b']}
    """
    best: dict[str, tuple[float, str]] = {}
    for rec in data.records:
        rating = float(np.mean([rec.human[a] for a in aspects]))
        if rec.group not in best or rating > best[rec.group][0]:
            best[rec.group] = (rating, rec.item.output)
    return {g: [text] for g, (_, text) in best.items()}


def damage_sample(groups: Sequence[str], per_group: Optional[int], first_groups: Optional[int], seed: int) -> list[int]:
    """Indices of the outputs that get damaged copies: ``per_group`` per input (seeded), in the first
    ``first_groups`` inputs."""
    by_group = _indices_by_group(groups)
    chosen = []
    rng = random.Random(seed)
    for g in list(by_group)[:first_groups]:
        idx = by_group[g]
        chosen.extend(sorted(rng.sample(idx, per_group)) if per_group is not None and per_group < len(idx) else idx)
    return chosen


def _damage(reward, data, results, settings: ScoreboardSettings, progress: bool, withhold: bool = False) -> dict:
    from .damage import FAMILIES, SOURCE_FAMILIES, damage

    # without the source, a fact changed against it cannot be seen: those families do not apply
    families = [f for f in FAMILIES if not (withhold and f in SOURCE_FAMILIES)]
    picked = damage_sample(data.groups, settings.damage_per_group, settings.damage_groups, settings.seed)
    copies: list[tuple[int, str, Item]] = []
    for k in picked:
        it = data.records[k].item
        for fam, text in damage(it.output, it.source or "", families, seed=settings.seed).items():
            copies.append((k, fam, Item(text, "" if withhold else it.source, it.reference, f"{it.id}/{fam}")))
    scored = _score(reward, [c[2] for c in copies], f"{data.name}: damaged copies", progress)
    fams: dict[str, dict] = {}
    for (k, fam, _), r in zip(copies, scored):
        f = fams.setdefault(fam, {"reward": [], "judge": []})
        f["reward"].append((results[k].value, r.value))
        f["judge"].append((judge_alone(results[k], reward.weights), judge_alone(r, reward.weights)))
    out = {fam: {"reward": share_below(v["reward"]), "judge": share_below(v["judge"])}
           for fam, v in sorted(fams.items(), key=lambda kv: list(FAMILIES).index(kv[0]))}
    examples = {}
    for (k, fam, item), r in zip(copies, scored):
        examples.setdefault(fam, {"original": data.records[k].item.output, "damaged": item.output,
                                  "reward_original": results[k].value, "reward_damaged": r.value})
    na = {"not_applicable": [f for f in FAMILIES if f not in families]} if withhold else {}
    return {"outputs": len(picked), "texts": len(copies), "families": out, "examples": examples, **na}


def probe_range_problem(n_groups: int, settings: ScoreboardSettings) -> Optional[str]:
    """Why the probed inputs would be empty (``probe_offset`` past the inputs measured), or None."""
    if settings.probe_groups and settings.probe_offset >= n_groups:
        return (f"probe_offset {settings.probe_offset}: the {n_groups} inputs measured leave none to probe "
                f"(lower it below {n_groups}, raise groups, or set probe_groups 0)")
    return None


def probe_pairs(data, references: dict[str, Sequence[str]], n: int, max_source_words: Optional[int],
                offset: int = 0, keep_reference: bool = False) -> list[Item]:
    """One pair per input for the probe suite, after the first ``offset`` inputs: its source (cut to
    ``max_source_words``) and its first human reference as the real output. ``keep_reference``:
    the pair keeps the input's own ``reference`` where it is part of the input (a dialogue's fact)
    rather than a target."""
    pairs, seen = [], set()
    for rec in data.records:
        if rec.group in seen or rec.group not in references or not references[rec.group]:
            continue
        seen.add(rec.group)
        if len(seen) <= offset:
            continue
        source = rec.item.source or ""
        if max_source_words:
            source = " ".join(source.split()[:max_source_words])
        pairs.append(Item(references[rec.group][0], source, rec.item.reference if keep_reference else None, rec.group))
        if len(pairs) == n:
            break
    return pairs


def _attacks(reward, data, references, settings: ScoreboardSettings, progress: bool, withhold: bool = False) -> dict:
    from .probes import reward_task, run_probes

    # the data's task decides what a fair output is; a set this module does not know: the reward's
    task = DATASETS[data.name].task if data.name in DATASETS else reward_task(reward)
    # a dialogue item's reference is the fact given with the history: the reply is judged with it,
    # unless the reward reads the text alone
    pairs = probe_pairs(data, references, settings.probe_groups, settings.max_source_words, settings.probe_offset,
                        keep_reference=task == "dialogue" and not withhold)
    # without the source: the wordings are still built from it (its words and names), the reward
    # reads the texts alone, and the families only the source exposes are not applicable
    report = run_probes(reward, pairs, n_boot=0, progress=progress, withhold_source=withhold, task=task)
    na = {}
    if withhold:
        na["not_applicable"] = report.meta.get("not_applicable", [])
    if report.meta.get("not_applicable_wordings"):
        na["not_applicable_wordings"] = report.meta["not_applicable_wordings"]
    tables = {"families": {f: family_table(r) for f, r in report.families.items() if r.n_items},
              "fair": {f: family_table(r) for f, r in report.fair.items()}}
    # the real outputs' reward terms: where they are the human references, the only references the
    # judge reads, so what the guards that read its tokens charge them (the guard cost)
    real = [it.components for it in report.items if it.value is not None]
    return {"pairs": len(pairs), "texts": report.meta.get("texts_scored"), "task": task,
            **tables, "excluded": report.meta.get("excluded", 0), **na}, real


def family_table(r) -> dict:
    """A family's row of the scoreboard's attack table, from its :class:`probes.FamilyResult`."""
    return {"n": r.n_items, "wins": r.wins, "win_rate": r.win_rate, "best_margin": r.inflation,
            "variants": {v: {k: c[k] for k in ("n", "wins", "none")} for v, c in r.variants.items()}}


def attack_tables(items, task: Optional[str] = None, skip_lead: bool = False) -> dict:
    """From the probe suite's per-item outcomes: per family, the share of items on which its best
    attack wording beats the real output (``families``), and the same for its fair wordings (``fair``);
    a family with no such wording on any item is left out. ``task``: what the outputs are for
    (:attr:`RatedSet.task`); a wording fair only for other tasks (the source's lead, fair for a
    summary) counts as an attack. None: fair for any task. ``skip_lead``: leave out the source's lead
    and its rewrites (:func:`probes.split_wordings`)."""
    from .probes import FAMILIES as PROBE_FAMILIES, split_wordings, summarise_family

    tables: dict[str, dict] = {"families": {}, "fair": {}}
    for fam in PROBE_FAMILIES:
        for table, wordings in zip(tables.values(), split_wordings(fam, task, skip_lead)):
            r = summarise_family(fam, items, n_boot=0, wordings=wordings) if wordings else None
            if r is not None and r.n_items:
                table[fam] = family_table(r)
    return tables


def _guard_cost(reward, items, results, human, groups, references, judged_references: Sequence[dict] = ()) -> dict:
    """Per enabled guard: the share of honest outputs it charges, and the reward's summary-level
    Spearman with each aspect with and without its charge.

    The text guards are run on every human reference. A guard that reads the judge's tokens is
    counted on the references the judge read (``judged_references``: their reward terms, the probed
    inputs' first references), with their number in ``references_judged``."""
    from .metaeval.significance import GroupedData

    # the human references: the text guards only (the references are not judged here)
    ref_reports = []
    if references:
        sources = {}  # the items' sources: already withheld ("") for a reward that reads none
        for it, g in zip(items, groups):
            sources.setdefault(g, it.source)
        ref_items = [Item(text, sources[g]) for g in sources for text in references.get(g, ())]
        if ref_items:
            ref_reports = reward.guard_reports(*reward.prepare(ref_items))
    order = _group_order(groups)

    def agreement(values) -> dict[str, float | None]:
        out = {}
        for a, h in human.items():
            gd = GroupedData([np.nan if v is None else v for v in values], h, groups, None, order)
            out[a] = _clean(gd.statistic("sample", "spearman", per_group=gd.per_group("spearman")))
        return out

    with_all = agreement([r.value for r in results])  # the reward as it is: the same for every guard
    out = {}
    for g in reward.guards.enabled:
        pen = [r.components.get(f"guard/{g}") for r in results]
        charged = [p for p in pen if p is not None and p > 1e-12]
        row = {"outputs_charged": len(charged) / len(items) if items else None,
               "outputs_mean_charge": float(np.mean(charged)) if charged else 0.0}
        if ref_reports and g in ref_reports[0].penalties:
            ref_charged = [r.penalties[g] for r in ref_reports if r.penalties.get(g, 0.0) > 1e-12]
            row["references_charged"] = len(ref_charged) / len(ref_reports)
        elif judged_references:
            ref_charged = [c for c in judged_references if (c.get(f"guard/{g}") or 0.0) > 1e-12]
            row["references_charged"] = len(ref_charged) / len(judged_references)
            row["references_judged"] = len(judged_references)
        else:
            row["references_charged"] = None  # a guard that reads the judge's tokens, and no reference judged
        # rounded: adding a charge back must not break a tie that rounding error made
        without = [round(r.value + (p or 0.0), 12) if r.value is not None else None for r, p in zip(results, pen)]
        row["agreement_with"], row["agreement_without"] = with_all, agreement(without)
        out[g] = row
    if ref_reports:
        out["_references"] = len(ref_reports)
    return out


# -- reports ----------------------------------------------------------------------------------------


def render_markdown(board: Scoreboard) -> str:
    aspects = list(next(iter(board.agreement.values()), {}).keys()) if board.agreement else []
    lines = [f"## {board.config or 'reward'} on {board.dataset}", ""]
    term = f"term: {board.reward['term']}; " if board.reward.get("term") else ""  # (boards before reward.term lack it)
    lines.append(f"{board.meta.get('n_items')} rated outputs of {board.meta.get('n_groups')} inputs; "
                 f"{term}guards: {', '.join(board.reward.get('guards', [])) or 'none'}.")
    withheld = board.meta.get("source", {})
    if withheld.get("withheld"):
        lines += ["", f"The reward reads no source: it was given the outputs alone, and is compared with the ratings "
                      f"of the text by itself ({', '.join(withheld['aspects'])}; left out: "
                      f"{', '.join(withheld['aspects_left_out']) or 'none'})."]
    if board.meta.get("judge_spread") is not None:
        lines += ["", f"The judge's spread on these outputs (median within-input standard deviation of its score, "
                      f"`validated_with.spread`): {board.meta['judge_spread']:.4g}."]
    lines += ["", "**Agreement** with people (summary-level Spearman [95% CI]; dataset-level Spearman)", "",
              "| metric | " + " | ".join(aspects) + " |", "|---|" + "---|" * len(aspects)]
    for metric in board.agreement:
        cells = []
        for a in aspects:
            c = board.agreement[metric].get(a)
            if c is None:
                cells.append("")
                continue
            s, d = c["sample/spearman"], c["dataset/spearman"]
            ci = f" [{_f(s['ci'][0], 2)}, {_f(s['ci'][1], 2)}]" if s["ci"][0] is not None else ""
            cells.append(f"{_f(s['value'])}{ci}; {_f(d['value'])}")
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    lines += ["", "**Selection**: normalised gain of the top pick per input, (pick - mean) / (best - mean); "
              "a random pick scores 0", "", "| picker | " + " | ".join(aspects) + " |", "|---|" + "---|" * len(aspects)]
    for picker in SELECTORS:
        row = [board.selection[a][picker] for a in aspects if picker in board.selection.get(a, {})]
        lines.append(f"| {picker} | " + " | ".join(f"{_f(r['gain'], 2, True)} ({_f(r['pick_rating'], 2)})" for r in row) + " |")
    if board.damage.get("families"):
        lines += ["", f"**Damage**: share of damaged copies scored below the original "
                      f"({board.damage['outputs']} outputs, {board.damage['texts']} copies)", "",
                  "| family | n | reward | judge alone | reward's mean drop |", "|---|---|---|---|---|"]
        for fam, f in board.damage["families"].items():
            lines.append(f"| {fam} | {f['reward']['n']} | {_f(f['reward']['share_below'], 2)} | "
                         f"{_f(f['judge']['share_below'], 2)} | {_f(f['reward']['mean_drop'], 3)} |")
        if board.damage.get("not_applicable"):
            lines += ["", "Not applicable without the source (a fact changed against it): "
                      + ", ".join(board.damage["not_applicable"])]
    if board.attacks.get("families"):
        real = ("the output people rated best" if board.attacks.get("real_output") == "best_rated"
                else "the human reference")
        lines += ["", f"**Attacks**: share of inputs on which the family's best attack wording beats {real} "
                      f"({board.attacks['pairs']} inputs)", "",
                  "| family | win rate | best attack's mean margin |", "|---|---|---|"]
        for fam, f in board.attacks["families"].items():
            lines.append(f"| {fam} | {_f(f['win_rate'], 2)} | {_f(f['best_margin'], 3, True)} |")
        if board.attacks.get("fair"):
            lines += ["", f"Fair outputs (not attacks; what they score against {real}): " + ", ".join(
                f"{fam} {_f(f['win_rate'], 2)} ({', '.join(f['variants'])})" for fam, f in board.attacks["fair"].items())]
        if board.attacks.get("not_applicable"):
            lines += ["", "Not applicable without the source (honest-looking text unless read against it; not run): "
                      + ", ".join(board.attacks["not_applicable"])]
        if board.attacks.get("not_applicable_wordings"):
            lines += ["", "Left out without the source (the source's lead or a rewrite of it, a copy only the "
                      "source shows, and no fair output for this task): "
                      + ", ".join(board.attacks["not_applicable_wordings"])]
    if board.guard_cost:
        lines += ["", "**Guard cost**: share of honest outputs charged; summary-level Spearman with / without the guard",
                  "", "| guard | system outputs | references | " + " | ".join(aspects) + " |",
                  "|---|---|---|" + "---|" * len(aspects)]
        for g, row in board.guard_cost.items():
            if g.startswith("_"):
                continue
            cells = [f"{_f(row['agreement_with'].get(a))} / {_f(row['agreement_without'].get(a))}" for a in aspects]
            judged = f" (of {row['references_judged']} judged)" if row.get("references_judged") else ""
            lines.append(f"| {g} | {_f(row['outputs_charged'], 3)} | {_f(row['references_charged'], 3)}{judged} | "
                         + " | ".join(cells) + " |")
    unscored = unscored_counts(board)
    if any(unscored.values()):
        reasons = ", ".join(f"{r} {n}" for r, n in board.meta.get("reward_failures", {}).items())
        lines += ["", f"**Not scored** (a None reward, left out of every figure above): {unscored['outputs']} rated "
                      f"outputs{f' ({reasons})' if reasons else ''}, {unscored['damage']} damaged copies, "
                      f"{unscored['attacks']} attack and fair wordings."]
    return "\n".join(lines) + "\n"


def unscored_counts(board: Scoreboard) -> dict[str, int]:
    """How many rated outputs, damaged copies and probe wordings got a ``None`` reward (a judge
    failure, or with ``cache.replay_only`` a text the cache has no judgment for)."""
    damage = sum(f["reward"].get("unscored", 0) for f in board.damage.get("families", {}).values())
    attacks = sum(v["none"] for part in ("families", "fair") for f in board.attacks.get(part, {}).values()
                  for v in f["variants"].values())
    return {"outputs": sum(board.meta.get("reward_failures", {}).values()), "damage": damage, "attacks": attacks}


def plot(boards: Sequence[Scoreboard], path: str | Path) -> Path:
    """Each config as a point: validity (mean summary-level Spearman of its reward) against
    robustness (1 - its worst attack family's win rate), damage detection as the marker's colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for b in boards:
        x = 1 - b.max_attack_win_rate if b.max_attack_win_rate is not None else float("nan")
        y = b.validity if b.validity is not None else float("nan")
        d = b.min_damage_share
        sc = ax.scatter([x], [y], c=[d if d is not None else 0.0], cmap="viridis", vmin=0, vmax=1, s=80,
                        edgecolors="black")
        ax.annotate(f"{b.config} ({b.dataset})", (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)
    fig.colorbar(sc, ax=ax, label="worst damage family: share scored below the original")
    ax.set_xlabel("robustness: 1 - worst attack family's win rate")
    ax.set_ylabel("validity: reward's Spearman with people\n(summary level, mean of aspects)")
    ax.set_xlim(-0.05, 1.3)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_title("Reward scoreboard")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write(boards: Sequence[Scoreboard], out_dir: str | Path, figure: bool = True) -> dict[str, Path]:
    """``scoreboard.json``, ``scoreboard.md`` and (with ``figure``) ``scoreboard.png`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "scoreboard.json", "markdown": out / "scoreboard.md"}
    paths["json"].write_text(json.dumps([b.to_json() for b in boards], indent=1))
    paths["markdown"].write_text("\n".join(b.to_markdown() for b in boards))
    if figure:
        paths["figure"] = plot(boards, out / "scoreboard.png")
    return paths


def flat(board: Scoreboard, prefix: str = "scoreboard") -> dict[str, float]:
    """Scalars for W&B: ``<prefix>/<dataset>/agreement/<aspect>``, ``.../selection/<aspect>``,
    ``.../damage/<family>``, ``.../attack/<family>``."""
    p = f"{prefix}/{board.dataset}"
    out = {f"{p}/agreement/{a}": v for a, v in board.reward_agreement().items() if v is not None}
    out.update({f"{p}/selection/{a}": s["reward"]["gain"] for a, s in board.selection.items()
                if s["reward"]["gain"] is not None})
    out.update({f"{p}/damage/{fam}": f["reward"]["share_below"] for fam, f in board.damage.get("families", {}).items()
                if f["reward"]["share_below"] is not None})
    out.update({f"{p}/attack/{fam}": f["win_rate"] for fam, f in board.attacks.get("families", {}).items()
                if f["win_rate"] is not None})
    return out


def from_json(raw: dict) -> Scoreboard:
    return Scoreboard(**raw)

