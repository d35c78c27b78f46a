"""Reward divergence monitor: does the reward keep rising while what it should measure gets worse?

A policy that exploits its reward makes the reward rise; whether it also learned what people want
shows only in measures the policy is not trained on. This monitor reads the policy's own training
completions (no extra generation) and tracks, per optimiser step,

* the **reward** the trainer optimises;
* the **judge alone** (the reward's judge terms before any guard), when the reward has guards;
* **reference overlap**: ROUGE-L F1 of the completion against the dataset's reference, when the
  data has one;
* **unsupported facts**: the share of the completion's numbers and names that its source does not
  give (:func:`unsupported_share`);
* **unfinished**: whether the generation limit cut the completion where no sentence ends
  (:func:`judge_reward.guards.ends_complete` is false and it used every token it was allowed; a
  completion the policy ended itself without a final mark is not cut. Without token counts, the
  text rule alone);
* **damage sensitivity** (optional, costs judge calls): the share of damaged copies of the policy's
  completions (:mod:`judge_reward.damage`) that the reward scores below the completion itself.

It flags (:func:`check_divergence`) when the reward rose from the first steps (the baseline) to the
latest ones by ``min_reward_z`` standard errors while at least one of these signals got worse by
``min_signal_z`` standard errors and by its ``min_change``, or sits past its ``max_level`` without
getting better (most completions unfinished), for ``patience`` checks in a row. The standard errors
come from per-step means, so the completions of one prompt count once.

Use it online, around the reward function it watches::

    monitor = RewardDivergenceCallback(DivergenceConfig(action="warn"))
    trainer = GRPOTrainer(model=..., reward_funcs=[monitor.watch(reward)], callbacks=[monitor], ...)

or offline on saved completions with :func:`replay` (``benchmarks/monitor_replay.py``).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Iterable, Literal, Optional, Sequence

import numpy as np
from transformers import TrainerCallback

from judge_reward.config import ConfigError, NonNegativeInt, PositiveFloat, PositiveInt, Section

from .monitor import _jsonable, log_metrics, take_action

PREFIX = "divergence"
ACTIONS = ("log", "warn", "stop")

# name -> +1 when higher is better, -1 when lower is better
SIGNALS: dict[str, int] = {
    "judge_alone": +1,
    "reference_overlap": +1,
    "unsupported": -1,
    "unfinished": -1,
    "damage_sensitivity": +1,
}

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+\b")
"""A capitalised word that does not open the text or a sentence: a name, in English prose."""


class RewardDivergenceWarning(UserWarning):
    """The reward keeps rising while a measure the policy is not trained on gets worse."""


def unsupported_share(output: str, source: str) -> float | None:
    """Share of the output's numbers and names (:data:`NUMBER`, :data:`NAME`) that ``source`` does
    not contain (case-insensitive); ``None`` when the output has neither.

    >>> round(unsupported_share("Smith scored 3 goals on Monday, said Jones.", "Jones said Smith scored 3 goals."), 2)
    0.33
    """
    found = NUMBER.findall(output) + NAME.findall(output)
    if not found:
        return None
    text = source.lower()
    return sum(f.lower() not in text for f in found) / len(found)


def completion_signals(output: str, source: str, reference: str | None = None, rouge=None,
                       hit_limit: bool | None = None) -> dict[str, float | None]:
    """The signals of one completion that need no judge: ``reference_overlap`` (needs ``reference``
    and a ``rouge_score`` scorer), ``unsupported`` and ``unfinished``.

    ``unfinished`` is 1 when the text does not end as a finished sentence and ``hit_limit`` (the
    completion used every token the trainer allowed) is true or unknown (``None``): a policy that ends
    its sentence without the full stop has stopped by itself, which is a style, not a cut.

    >>> completion_signals("Smith scored 3 goals for", "", hit_limit=True)["unfinished"]
    1.0
    >>> completion_signals("Smith scored 3 goals for Leeds", "", hit_limit=False)["unfinished"]
    0.0
    """
    from judge_reward.guards import ends_complete

    overlap = None
    if reference and rouge is not None and output.strip():
        overlap = rouge.score(reference, output)["rougeL"].fmeasure
    cut = bool(output.strip()) and not ends_complete(output) and hit_limit is not False
    return {"reference_overlap": overlap, "unsupported": unsupported_share(output, source), "unfinished": float(cut)}


def rouge_l_scorer():
    try:
        from rouge_score import rouge_scorer
    except ImportError as err:  # pragma: no cover - rouge-score ships with the metaeval extra
        raise ImportError("reference_overlap needs rouge-score: pip install 'judge-reward[metaeval]'") from err
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


@dataclass
class DivergenceConfig(Section):
    """When the monitor checks, what it compares, and what it does when the rule holds."""

    section_path: ClassVar[str] = "divergence"

    every_n_steps: PositiveInt = 5
    """Check the rule every this many optimiser steps."""
    baseline_steps: PositiveInt = 5
    """The first this many steps with completions are the baseline (the policy before it learned much)."""
    window_steps: PositiveInt = 10
    """The latest this many steps are compared with the baseline (checks start once they do not overlap it)."""
    min_reward_z: PositiveFloat = 2.0
    """The reward must have risen by this many standard errors of the difference of the two windows' step means."""
    min_signal_z: PositiveFloat = 3.0
    """A signal must have got worse by this many standard errors..."""
    min_change: dict[str, float] = field(default_factory=lambda: {
        "judge_alone": 0.0, "reference_overlap": 0.03, "unsupported": 0.10, "unfinished": 0.10,
        "damage_sensitivity": 0.15})
    """...and by at least this much (its own units: shares, ROUGE F1, the judge's score)."""
    max_level: dict[str, float] = field(default_factory=lambda: {"unfinished": 0.5})
    """A signal whose latest window sits at or past this level (on its worse side) while the reward
    rises, and that is not getting better, also counts as worse: a reward that keeps climbing while
    most completions stop mid-sentence is not teaching them to finish, however they started."""
    patience: PositiveInt = 2
    """Checks in a row that must satisfy the rule before acting."""
    action: Literal[ACTIONS] = "warn"
    """``log`` (metrics only), ``warn`` (also a warning) or ``stop`` (also ``control.should_training_stop``)."""
    source_column: str = "source"
    """Dataset column with the source (the article); the prompt's last message when absent."""
    reference_column: Optional[str] = "reference"
    """Dataset column with a human reference, for ``reference_overlap``; ``None`` to skip it."""
    damage_every_n_steps: NonNegativeInt = 0
    """Measure damage sensitivity every this many steps (0: never; it costs ``damage_sample`` x
    families judge calls each time)."""
    damage_sample: PositiveInt = 4
    """Completions damaged per damage measurement (the first of each prompt's group, then the rest)."""
    damage_families: list[str] = field(default_factory=lambda: ["swap_content_words", "change_number", "reverse_sentences",
                                                                "cut_mid_sentence"])
    max_completion_tokens: Optional[PositiveInt] = None
    """The generation limit, for ``unfinished``: a completion of this many tokens that does not end a
    sentence was cut. ``None``: the trainer's ``max_completion_length`` (TRL passes the completions'
    token ids to reward functions); with neither, every completion without a final mark counts."""
    history_file: Optional[str] = "divergence.json"
    """Written to the trainer's ``output_dir`` after every check; ``None`` to skip."""

    def check(self) -> None:
        for name in ("min_change", "max_level"):
            unknown = [k for k in getattr(self, name) if k not in SIGNALS]
            if unknown:
                raise ConfigError(f"unknown signal {unknown[0]!r}; known: {', '.join(SIGNALS)}", field=name)
        from judge_reward.damage import FAMILIES

        bad = [f for f in self.damage_families if f not in FAMILIES]
        if bad:
            raise ConfigError(f"unknown damage family {bad[0]!r}; known: {', '.join(FAMILIES)}", field="damage_families")


# -- per-step records and the rule ----------------------------------------------------------------


@dataclass
class StepRecord:
    """Per-step means (``None`` where a signal had no value at that step) and the completion count."""

    step: int
    n: int
    values: dict[str, float | None]


@dataclass
class DivergenceResult:
    satisfied: bool
    ready: bool
    reward_z: float | None = None
    reward_rise: float | None = None
    signals: dict[str, dict] = field(default_factory=dict)
    degraded: list[str] = field(default_factory=list)
    reason: str = ""


def _window_change(base: Sequence[float], recent: Sequence[float]) -> tuple[float, float] | None:
    """(recent mean - base mean, its standard error) from per-step values; None with under 2 per window."""
    if len(base) < 2 or len(recent) < 2:
        return None
    b, r = np.asarray(base, float), np.asarray(recent, float)
    se = math.sqrt(b.var(ddof=1) / len(b) + r.var(ddof=1) / len(r))
    return float(r.mean() - b.mean()), se


def _pooled_change(base: Sequence[StepRecord], recent: Sequence[StepRecord]) -> tuple[float, float, float] | None:
    """Damage sensitivity: (recent share - baseline share, its binomial standard error, the recent
    share) over the pairs each window's measurements scored; None unless both windows have one."""
    def pool(rows):
        done = [(r.values["damage_sensitivity"], r.values.get("damage_pairs") or 0) for r in rows
                if r.values.get("damage_sensitivity") is not None]
        n = sum(k for _, k in done)
        return (sum(v * k for v, k in done) / n, n) if n else None

    b, r = pool(base), pool(recent)
    if b is None or r is None:
        return None
    se = math.sqrt(b[0] * (1 - b[0]) / b[1] + r[0] * (1 - r[0]) / r[1])
    return r[0] - b[0], se, r[0]


def _z(change: float, se: float) -> float:
    if se > 0:
        return change / se
    return math.inf if change > 0 else (-math.inf if change < 0 else 0.0)


def check_divergence(history: Sequence[StepRecord], config: DivergenceConfig) -> DivergenceResult:
    """Does the rule hold over ``history`` (per-step records in step order)? Patience is the caller's."""
    steps = [h for h in history if h.n > 0]
    need = config.baseline_steps + config.window_steps
    if len(steps) < need:
        return DivergenceResult(False, False, reason=f"{len(steps)} of {need} steps with completions so far")
    base, recent = steps[:config.baseline_steps], steps[-config.window_steps:]

    def column(rows, name):
        return [r.values[name] for r in rows if r.values.get(name) is not None]

    reward = _window_change(column(base, "reward"), column(recent, "reward"))
    if reward is None:
        return DivergenceResult(False, True, reason="fewer than 2 scored steps in a window")
    rise, se = reward
    reward_z = _z(rise, se)
    signals, degraded = {}, []
    for name, direction in SIGNALS.items():
        if name == "damage_sensitivity":  # measured every few steps: pool the pairs of each window
            got = _pooled_change(base, recent)
        else:
            got = _window_change(column(base, name), column(recent, name))
            got = got and (*got, float(np.mean(column(recent, name))))
        if got is None:
            continue
        change, s_se, recent_level = got
        worse = -direction * change
        z = _z(worse, s_se)
        signals[name] = {"baseline": recent_level - change, "recent": recent_level, "change": change, "worse_z": z}
        level = config.max_level.get(name)
        stuck = level is not None and -direction * (recent_level - level) >= 0 and z >= 0
        if (z >= config.min_signal_z and worse >= config.min_change.get(name, 0.0)) or stuck:
            degraded.append(name)
    rising = reward_z >= config.min_reward_z
    why = (f"reward {rise:+.4g} (z={reward_z:.2f}) from steps {base[0].step}-{base[-1].step} to "
           f"{recent[0].step}-{recent[-1].step}; " + (
               "worse: " + ", ".join(f"{n} {signals[n]['baseline']:.3f} -> {signals[n]['recent']:.3f} "
                                     f"(z={signals[n]['worse_z']:.2f})" for n in degraded) if degraded else "no signal worse"))
    return DivergenceResult(rising and bool(degraded), True, reward_z, rise, signals, degraded, why)


# -- the monitor ------------------------------------------------------------------------------------


class DivergenceMonitor:
    """Collects completions per step, reduces them to :class:`StepRecord` s and applies the rule.

    Framework-free: :class:`RewardDivergenceCallback` feeds it from a TRL trainer, :func:`replay` from
    saved completions.
    """

    def __init__(self, config: DivergenceConfig | None = None, reward=None):
        self.config = config or DivergenceConfig()
        self.reward = reward  # scores damaged copies: a Reward or a TRL reward function
        self.history: list[StepRecord] = []
        self.checks: list[dict] = []
        self.flags: list[dict] = []
        self._pending: dict[int, list[dict]] = {}
        self._streak = 0
        self._rouge = None

    def add(self, step: int, outputs: Sequence[str], sources: Sequence[str], rewards: Sequence[float | None],
            references: Sequence[str | None] | None = None, judge_alone: Sequence[float | None] | None = None,
            damage_sensitivity: tuple[float, int] | None = None, lengths: Sequence[int | None] | None = None,
            max_tokens: int | None = None) -> None:
        """Record one reward call's completions at optimiser step ``step`` (several calls may share a
        step). ``lengths``: each completion's token count; with the generation limit (``max_tokens``,
        else the config's ``max_completion_tokens``) it tells a cut from a policy's own ending."""
        references = references if references is not None else [None] * len(outputs)
        if references and any(references) and self._rouge is None:
            self._rouge = rouge_l_scorer()
        limit = self.config.max_completion_tokens or max_tokens
        hits = [None if limit is None or n is None else n >= limit
                for n in (lengths if lengths is not None else [None] * len(outputs))]
        rows = self._pending.setdefault(step, [])
        for k, (out, src, rew, ref) in enumerate(zip(outputs, sources, rewards, references)):
            row = {"reward": rew, **completion_signals(out, src, ref, self._rouge, hits[k])}
            row["judge_alone"] = judge_alone[k] if judge_alone is not None else None
            rows.append(row)
        if damage_sensitivity is not None:
            share, pairs = damage_sensitivity
            rows.append({"damage_sensitivity": share, "damage_pairs": pairs, "_extra": True})

    def end_step(self, step: int) -> DivergenceResult | None:
        """Close step ``step``; every ``every_n_steps`` steps apply the rule and return its result."""
        rows = self._pending.pop(step, [])
        completions = [r for r in rows if not r.get("_extra")]
        values = {}
        for name in ("reward", *SIGNALS):
            got = [r[name] for r in rows if r.get(name) is not None]
            values[name] = float(np.mean(got)) if got else None
        values["damage_pairs"] = sum(r.get("damage_pairs", 0) for r in rows) or None
        self.history.append(StepRecord(step, len(completions), values))
        if step % self.config.every_n_steps:
            return None
        result = check_divergence(self.history, self.config)
        self._streak = self._streak + 1 if result.satisfied else 0
        flagged = self._streak >= self.config.patience
        self.checks.append({"step": step, "flag": flagged, **asdict(result)})
        if flagged:
            self.flags.append({"step": step, "why": result.reason, "degraded": result.degraded})
        return result

    @property
    def flagged(self) -> bool:
        return bool(self.checks) and self.checks[-1]["flag"]

    def metrics(self) -> dict[str, float]:
        """The last step's means and the last check's figures, under ``divergence/``."""
        out = {}
        if self.history:
            out.update({f"{PREFIX}/{k}": v for k, v in self.history[-1].values.items() if v is not None})
        if self.checks:
            last = self.checks[-1]
            out[f"{PREFIX}/flag"] = float(last["flag"])
            if last["reward_z"] is not None:
                out[f"{PREFIX}/reward_z"] = min(last["reward_z"], 1e6)
            for name, s in last["signals"].items():
                out[f"{PREFIX}/{name}_worse_z"] = max(min(s["worse_z"], 1e6), -1e6)
        return out

    def damage_sensitivity(self, outputs: Sequence[str], sources: Sequence[str],
                           score: Callable) -> tuple[float, int] | None:
        """Share of damaged copies of ``outputs`` (the configured families) that ``score`` rates below
        their original, and how many (original, damaged) pairs were scored. ``score(texts, sources)
        -> [float | None]``."""
        from judge_reward.damage import damage

        originals, damaged = [], []
        for out, src in zip(outputs, sources):
            for text in damage(out, src, self.config.damage_families).values():
                originals.append((out, src))
                damaged.append((text, src))
        if not damaged:
            return None
        unique = list(dict.fromkeys(originals))
        values = dict(zip(unique, score([o for o, _ in unique], [s for _, s in unique])))
        scored = score([t for t, _ in damaged], [s for _, s in damaged])
        pairs = [(values[o], d) for o, d in zip(originals, scored) if values[o] is not None and d is not None]
        return (sum(d < v for v, d in pairs) / len(pairs), len(pairs)) if pairs else None

    def to_json(self) -> dict:
        return _jsonable({"config": asdict(self.config), "steps": [asdict(h) for h in self.history],
                          "checks": self.checks, "flags": self.flags})


def replay(rows: Iterable[dict], sources: dict[str, str], references: dict[str, str] | None = None,
           config: DivergenceConfig | None = None, score: Callable | None = None) -> DivergenceMonitor:
    """Run the monitor over saved completions: ``rows`` of ``{step, doc_id, output, reward[, judge_only,
    tokens]}`` in step order (``benchmarks/grpo_hacking.py`` writes them to ``completions.jsonl``);
    ``sources`` and ``references`` by doc id. ``tokens`` (the completion's length) and the config's
    ``max_completion_tokens`` tell cuts from unpunctuated endings. ``score(texts, sources)`` enables
    damage sensitivity."""
    monitor = DivergenceMonitor(config)
    by_step: dict[int, list[dict]] = {}
    for row in rows:
        by_step.setdefault(int(row["step"]), []).append(row)
    every = monitor.config.damage_every_n_steps
    for step in sorted(by_step):
        got = by_step[step]
        outs = [r["output"] for r in got]
        srcs = [sources[r["doc_id"]] for r in got]
        refs = [references.get(r["doc_id"]) for r in got] if references else None
        judge = [r.get("judge_only") for r in got]
        same = all(j is None or r.get("reward") is None or abs(j - r["reward"]) < 1e-12 for j, r in zip(judge, got))
        sensitivity = None
        if score is not None and every and step % every == 0:
            pick = _damage_pick(srcs, monitor.config.damage_sample)
            sensitivity = monitor.damage_sensitivity([outs[i] for i in pick], [srcs[i] for i in pick], score)
        monitor.add(step, outs, srcs, [r.get("reward") for r in got], refs, None if same else judge, sensitivity,
                    lengths=[r.get("tokens") for r in got])
        monitor.end_step(step)
    return monitor


def _damage_pick(sources: Sequence[str], n: int) -> list[int]:
    """Indices of ``n`` completions, spread over the prompts: each source's first, then its second..."""
    order: dict[str, list[int]] = {}
    for i, s in enumerate(sources):
        order.setdefault(s, []).append(i)
    picked, depth = [], 0
    while len(picked) < min(n, len(sources)):
        for idx in order.values():
            if depth < len(idx) and len(picked) < n:
                picked.append(idx[depth])
        depth += 1
    return picked


# -- TRL -------------------------------------------------------------------------------------------


class WatchedReward:
    """A TRL reward function that passes every call through and shows its completions to a monitor."""

    def __init__(self, reward_fn, monitor: "RewardDivergenceCallback"):
        self.reward_fn, self.monitor = reward_fn, monitor
        self.__name__ = getattr(reward_fn, "__name__", type(reward_fn).__name__)

    def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        rewards = self.reward_fn(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        self.monitor.observe(self.reward_fn, prompts, completions, rewards, kwargs, completion_ids)
        return rewards


class AsyncWatchedReward(WatchedReward):
    """:class:`WatchedReward` for an async reward function (TRL awaits those concurrently)."""

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs):  # type: ignore[override]
        rewards = await self.reward_fn(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        self.monitor.observe(self.reward_fn, prompts, completions, rewards, kwargs, completion_ids)
        return rewards


class RewardDivergenceCallback(TrainerCallback):
    """A ``TrainerCallback`` around :class:`DivergenceMonitor` (see the module docstring).

    Metrics go to the trainer's log (``divergence/*``; W&B when it reports there) through ``attach``
    or the ``log_history``; the history is written to ``output_dir/divergence.json``.
    """

    def __init__(self, config: DivergenceConfig | None = None, trainer=None):
        self.config = config or DivergenceConfig()
        self.monitor = DivergenceMonitor(self.config)
        self.trainer = trainer
        self.stopped_at: int | None = None
        self._step = 0
        self._max_tokens: int | None = None  # the trainer's generation limit, read at on_train_begin

    def watch(self, reward_fn) -> WatchedReward:
        """``reward_fn`` wrapped so the monitor sees each batch; give the wrapper to the trainer."""
        is_async = inspect.iscoroutinefunction(reward_fn) or inspect.iscoroutinefunction(getattr(reward_fn, "__call__", None))
        return (AsyncWatchedReward if is_async else WatchedReward)(reward_fn, self)

    def attach(self, trainer) -> "RewardDivergenceCallback":
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    def observe(self, reward_fn, prompts, completions, rewards, columns: dict, completion_ids=None) -> None:
        from judge_reward.reward import completion_text, prompt_source

        state = columns.get("trainer_state")
        step = state.global_step + 1 if state is not None else self._step + 1
        outputs = [completion_text(c) for c in completions]
        given = columns.get(self.config.source_column)
        sources = list(given) if given is not None else [prompt_source(p) for p in prompts]
        refs = columns.get(self.config.reference_column) if self.config.reference_column else None
        judge = _judge_alone(reward_fn, len(outputs))
        sensitivity = None
        every = self.config.damage_every_n_steps
        if every and step % every == 0 and not any(r.get("damage_sensitivity") is not None
                                                     for r in self.monitor._pending.get(step, [])):
            pick = _damage_pick(sources, self.config.damage_sample)
            sensitivity = self.monitor.damage_sensitivity([outputs[i] for i in pick], [sources[i] for i in pick],
                                                          reward_scorer(reward_fn))
        lengths = [len(ids) for ids in completion_ids] if completion_ids is not None else None
        self.monitor.add(step, outputs, sources, list(rewards), list(refs) if refs is not None else None, judge, sensitivity,
                         lengths=lengths, max_tokens=self._max_tokens)

    # -- events -------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        self._max_tokens = getattr(args, "max_completion_length", None)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        self._step = state.global_step
        result = self.monitor.end_step(state.global_step)
        if result is None:
            return control
        if self.monitor.flagged:
            self._act(state, control, result)
        self._log(args, state, control, self.monitor.metrics())
        self._write(args)
        return control

    def _act(self, state, control, result: DivergenceResult) -> None:
        message = f"reward divergence at step {state.global_step}: {result.reason} (action: {self.config.action})"
        if take_action(self.config.action, message, RewardDivergenceWarning, control):
            self.stopped_at = state.global_step

    def _log(self, args, state, control, metrics: dict) -> None:
        log_metrics(self.trainer, args, state, control, metrics)

    def _write(self, args) -> None:
        if not self.config.history_file or not getattr(args, "output_dir", None) or getattr(args, "process_index", 0):
            return
        path = Path(args.output_dir) / self.config.history_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**self.monitor.to_json(), "stopped_at": self.stopped_at}, indent=1))


def reward_scorer(reward_fn) -> Callable:
    """``score(texts, sources) -> [float | None]`` with the reward behind ``reward_fn``: a
    ``judge_reward.Reward`` (or a ``judge_reward.trainers.JudgeReward``'s, called directly so the trainer's
    logs and failure counts see only the training batches), else the TRL reward function itself."""
    from judge_reward import Item

    reward = getattr(reward_fn, "reward", reward_fn)
    if callable(reward) and getattr(reward, "aspects", None):
        return lambda texts, sources: [r.value for r in reward([Item(t, s) for t, s in zip(texts, sources)])]
    return lambda texts, sources: list(reward_fn(prompts=list(sources), completions=list(texts), source=list(sources)))


def _judge_alone(reward_fn, n: int) -> list[float | None] | None:
    """The judge's value before guards, per completion of the last batch, when ``reward_fn`` is a
    ``judge_reward.trainers.JudgeReward`` with guards (without guards it is the reward itself: no second signal)."""
    scorer = getattr(reward_fn, "scorer", None)
    reward = getattr(reward_fn, "reward", None)
    last = getattr(scorer, "_last", None)
    if reward is None or last is None or not getattr(getattr(reward, "guards", None), "enabled", False) or len(last[1]) != n:
        return None
    from judge_reward.scoreboard import judge_alone

    return [judge_alone(res, reward.weights) for res in last[1]]
