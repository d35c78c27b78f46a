"""The judge as a TRL reward function (GRPO, RLOO, OnlineDPO).

TRL calls a reward function as ``f(prompts=..., completions=..., completion_ids=..., **kwargs)``
where ``kwargs`` holds every other dataset column (one value per row), ``trainer_state`` and, in
GRPO/RLOO, ``log_metric`` and ``log_extra``. It must return one float or ``None`` per completion;
``None`` means "could not score", which GRPO and RLOO (TRL 1.16) leave out of the group baseline and
give a zero advantage (``torch.isnan(rewards_per_func).all(dim=1)`` in ``_generate_and_score_completions``).

A :class:`JudgeReward` turns one call into one ``judge.score`` call over the whole batch. The G
completions of a GRPO prompt are consecutive rows with the same source, so the judge backend runs
their shared prompt prefix (instructions + document) once per group.

Values: GPTScore's value is a mean token log-probability (<= 0); G-Eval and rating values lie on the
aspect's scale (e.g. 1-5). ``normalise`` picks what the trainer sees (see :data:`NORMALISATIONS`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, fields
from typing import Any, Callable, Optional, Sequence

from judge_reward import Item, Judge
from judge_reward.aspects import ConfigError
from judge_reward.reward import NORMALISATIONS, PARTIAL, Reward, RewardConfig, RewardResult, completion_text, prompt_source

__all__ = ["AsyncJudgeReward", "BatchScorer", "JudgeReward", "JudgeRewardConfig", "NORMALISATIONS", "PARTIAL",
           "message_text", "prompt_source"]


@dataclass
class JudgeRewardConfig(RewardConfig):
    """A :class:`~judge_reward.reward.RewardConfig` (aspects, weights, normalise, partial, guards:
    the reward itself) plus how TRL's batch columns reach the judge and how the reward is logged."""

    source_column: str = "source"
    """Dataset column with the text the completion is judged against (the article). When the batch
    has no such column, see ``source_from_prompt``."""
    reference_column: str = "reference"
    """Dataset column with a human reference (needed by reference-based GPTScore directions)."""
    source_from_prompt: Optional[bool] = None
    """When the batch has no ``source_column``: ``None`` (default) lets the judge read the prompt
    (the last user message of a conversational prompt) as the source, unless the reward compares the
    completion with its source (``RewardConfig.source_readers``: ``term: information``, and the guards
    length's ``max_source_ratio``, grounding, copy, copy_credit, information), which is then an error
    naming them; ``True`` uses the prompt as the source for the guards too; ``False`` makes a
    missing column an error."""
    name: str | None = None
    """``__name__`` TRL logs the reward under (``rewards/<name>/mean``); default ``judge`` or ``judge_<aspect>``."""
    log_prefix: str | None = None
    """Prefix of the judge diagnostics sent through ``log_metric`` (latency, per-aspect means and
    failures, G-Eval mass and entropy, guard penalties) and of its completions-table columns;
    default ``name``, else ``judge``. Two reward functions of one trainer need distinct prefixes:
    TRL averages metrics of one name, and a column written twice keeps the later values. Failed
    rewards are logged as ``rewards/<name>/failures``."""
    log_columns: bool = True
    """Add per-aspect scores, guard penalties and failure reasons to the completions table through
    ``log_extra`` (columns ``<prefix>/<aspect> (<method>)``, ``<prefix>/guard <name>``, ``<name> failure``)."""

    @classmethod
    def from_judge(cls, judge: Judge, **overrides) -> "JudgeRewardConfig":
        """The judge config's own ``reward:`` section, with ``overrides`` on top (what a trainer built
        from a judge config is rewarded with: the same number ``judge-reward score`` prints)."""
        return cls.from_judge_config(judge.config, **overrides)

    @classmethod
    def from_judge_config(cls, judge_config, **overrides) -> "JudgeRewardConfig":
        """:meth:`from_judge` from the judge's config alone (before its model loads)."""
        from judge_reward.judge import build_section

        raw = {**(judge_config.reward or {}), **{k: v for k, v in overrides.items() if v is not None}}
        return build_section(cls, raw, "reward")

    def reward_config(self) -> RewardConfig:
        return RewardConfig(**{f.name: getattr(self, f.name) for f in fields(RewardConfig)})


def message_text(value: Any, where: str) -> str:
    """The judged text of a completion (kept for callers of the old name; see :func:`completion_text`)."""
    return completion_text(value, where)


class BatchScorer:
    """Scores a batch once for several reward functions that share a reward (one per aspect).

    TRL calls the functions of a batch one after another with the same rows; the first call computes
    every aspect and guard any of them needs in one ``judge.score`` call, the others reuse the result.
    """

    def __init__(self, reward: Reward):
        self.reward = reward
        self._last: tuple[tuple, list[RewardResult]] | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:  # picklable: a lock cannot be, and the last batch is only a cache
        state = self.__dict__.copy()
        del state["_lock"]
        state["_last"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def method(self) -> str:
        return self.reward.method_name

    def score(self, items: list[Item]) -> tuple[list[RewardResult], float | None]:
        """Results per item, and the judge's wall seconds (``None`` when served from the last batch)."""
        key = tuple(items)
        with self._lock:
            if self._last is not None and self._last[0] == key:
                return self._last[1], None
            start = time.perf_counter()
            results = self.reward(items)
            seconds = time.perf_counter() - start
            self._last = (key, results)
            return results, seconds


GUARDS_PART = "guards"


class JudgeReward:
    """A reward function for TRL trainers backed by a :class:`~judge_reward.Judge`::

        reward = JudgeReward(judge)                     # the judge config's own reward: section
        reward = JudgeReward(judge, JudgeRewardConfig(aspects=["coherence"], normalise="unit"))
        trainer = GRPOTrainer(model=..., reward_funcs=reward, ...)   # logs rewards/judge_coherence/mean

    The number is :class:`judge_reward.reward.Reward`'s (weights, normalisation, guards), the same
    one ``judge-reward score`` and the service return for the config. Returns one float per
    completion, or ``None`` where the judge failed (counted by reason in :attr:`failures` and
    logged as ``rewards/<name>/failures``).
    """

    def __init__(self, judge: Judge, config: JudgeRewardConfig | None = None, *, scorer: BatchScorer | None = None,
                 part: str | None = None):
        self.judge = judge
        self.config = config if config is not None else JudgeRewardConfig.from_judge(judge)
        self.reward = scorer.reward if scorer is not None else Reward(judge, self.config.reward_config())
        self.part = part
        """``None``: the whole reward; an aspect name: that aspect's normalised value; ``"guards"``:
        minus the guard penalties (the pieces :meth:`per_aspect` hands to TRL's ``reward_weights``)."""
        self.aspects = [a for a in self.reward.aspects if part is None or a.name == part]
        self.method_name = self.reward.method_name
        self.weights = self.reward.weights
        default_name = "judge" if len(self.reward.aspects) > 1 else f"judge_{self.reward.aspects[0].name}"
        if part is not None:
            default_name = f"judge_{part}"
        self.__name__ = self.config.name or default_name
        self.log_prefix = self.config.log_prefix or self.config.name or "judge"
        self.scorer = scorer or BatchScorer(self.reward)
        self.failures: Counter[str] = Counter()
        self.calls = 0
        self.rows = 0
        self.seconds = 0.0
        self._pending: dict[str, list[float]] = defaultdict(list)
        self._pending_lock = threading.Lock()

    def __getstate__(self) -> dict:  # reward functions are picklable (a lock is not); pickle the
        state = self.__dict__.copy()  # per-aspect list as one object so its functions keep one scorer
        del state["_pending_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._pending_lock = threading.Lock()

    @classmethod
    def per_aspect(cls, judge: Judge, config: JudgeRewardConfig | None = None) -> list["JudgeReward"]:
        """One reward function per aspect (and one for the guards, when any is on), sharing one
        judge call per batch.

        Pass the list as ``reward_funcs`` and weigh aspects with TRL's ``reward_weights``; the guard
        function (``judge_guards``) returns minus the penalties, so give it weight 1. Note that
        TRL (1.16) sums weighted functions with ``nansum``: an aspect that failed for a row counts
        as 0 in that row's sum unless every function failed. With ``multi_objective_aggregation=
        "normalize_then_sum"`` that 0 is the group mean (neutral); see docs/trainers.md.
        """
        config = config if config is not None else JudgeRewardConfig.from_judge(judge)
        if config.weights is not None:
            raise ConfigError("reward.weights: per-aspect rewards are weighted by TRL's reward_weights, not here")
        term = config.reward_config().term
        if term != "judge":  # the pieces sum to the judge's score minus the guards, which this reward is not
            raise ConfigError(f"per-aspect rewards split the judge's score into its aspects; term {term!r} is not "
                              "the judge's score (use one JudgeReward)", field="reward.term")
        if config.name is not None:
            raise ConfigError("reward.name: per-aspect rewards are named judge_<aspect>; leave name unset")
        scorer = BatchScorer(Reward(judge, config.reward_config()))
        parts = [a.name for a in scorer.reward.aspects]
        if scorer.reward.guards.enabled:
            parts.append(GUARDS_PART)
        return [cls(judge, config, scorer=scorer, part=p) for p in parts]

    def use_inputs(self, sources: Sequence[str]) -> "JudgeReward":
        """The task's inputs (the training set's ``source`` column), for a guard that reads what
        other inputs give (``data_values.domain: inputs``): :meth:`judge_reward.Reward.use_inputs`.
        The per-aspect functions share one reward, so one call serves them all. Returns ``self``."""
        self.reward.use_inputs(sources)
        return self

    # -- values ----------------------------------------------------------------------------------

    def value(self, result: RewardResult) -> tuple[float | None, str | None]:
        """This function's number for one item's reward result, or ``None`` and the reason."""
        if self.part is None:
            return result.value, result.reason
        if self.part == GUARDS_PART:
            # No aspect scored (the judge failed on every one, or nothing reached it): None, so that
            # TRL sees every function fail and leaves the row out; a guard term alone would make it a
            # finite reward (0 when no guard charged) inside the group baseline.
            if not any(k.startswith("aspect/") for k in result.components):
                return None, result.reason or "no aspect was scored"
            return -sum(v for k, v in result.components.items() if k.startswith("guard/")), None
        got = result.components.get(f"aspect/{self.part}")
        if got is None:
            score = result.scores.get(self.part)
            return None, (score.reason if score is not None and score.reason else result.reason or "non-finite score")
        return got, None

    # -- the call TRL makes ---------------------------------------------------------------------

    def items(self, prompts: Sequence, completions: Sequence, columns: dict[str, Any]) -> list[Item]:
        if len(prompts) != len(completions):
            raise ValueError(f"prompts: {len(prompts)} prompts for {len(completions)} completions")
        n = len(completions)
        sources = columns.get(self.config.source_column)
        if sources is None:
            listed = sorted(k for k in columns if not k.startswith(("log_", "trainer_")))
            if self.config.source_from_prompt is False:
                raise ValueError(f"reward.source_column: the batch has no column {self.config.source_column!r} "
                                 f"(columns: {listed})")
            compared = self.reward.config.source_readers()
            if self.config.source_from_prompt is None and compared:
                raise ValueError(
                    f"reward: {', '.join(compared)} compare the completion with its source, and the batch has no "
                    f"column {self.config.source_column!r} (columns: {listed}); add the column, turn those guards off, "
                    f"or set JudgeRewardConfig(source_from_prompt=True) to compare with the prompt")
        references = columns.get(self.config.reference_column)
        for col, values in ((self.config.source_column, sources), (self.config.reference_column, references)):
            if values is not None and len(values) != n:
                raise ValueError(f"{col}: {len(values)} values for {n} completions")
        out = []
        for i in range(n):
            output = completion_text(completions[i], f"completions[{i}]")
            source = sources[i] if sources is not None else prompt_source(prompts[i], f"prompts[{i}]")
            if not isinstance(source, str):
                raise TypeError(f"{self.config.source_column}[{i}]: expected text, got {source!r:.80}")
            reference = references[i] if references is not None else None
            if reference is not None and not isinstance(reference, str):
                raise TypeError(f"{self.config.reference_column}[{i}]: expected text or None, got {reference!r:.80}")
            out.append(Item(output=output, source=source, reference=reference))
        return out

    def __call__(self, prompts: Sequence, completions: Sequence, completion_ids: Sequence | None = None, **kwargs) -> list[float | None]:
        log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
        log_extra: Callable[[str, list], None] | None = kwargs.get("log_extra")
        items = self.items(prompts, completions, kwargs)
        if not items:
            return []
        results, seconds = self.scorer.score(items)
        rewards, reasons = [], []
        for result in results:
            value, reason = self.value(result)
            rewards.append(value)
            reasons.append(reason)
            if reason is not None:
                self.failures[reason] += 1
        self.calls += 1
        self.rows += len(items)
        self.seconds += seconds or 0.0
        self._report(results, rewards, seconds, log_metric, log_extra, reasons)
        return rewards

    # -- logging ---------------------------------------------------------------------------------

    def metrics(self, results: list[RewardResult], rewards: list, seconds: float | None) -> dict[str, float]:
        """Scalar diagnostics of one call (what goes to ``log_metric``)."""
        p, n = self.log_prefix, len(rewards)
        failed = sum(r is None for r in rewards)
        out = {  # beside TRL's own rewards/<name>/mean and /std
            f"rewards/{self.__name__}/failures": float(failed),
            f"rewards/{self.__name__}/failure_rate": failed / n,
            f"rewards/{self.__name__}/failures_total": float(sum(self.failures.values())),
        }
        if seconds is not None:  # the call that ran the judge (per-aspect siblings reuse its result)
            out[f"{p}/latency_s"] = seconds
            out[f"{p}/seconds_per_item"] = seconds / n
        for a in self.aspects:
            values = [r.scores.get(a.name) for r in results]
            ok = [s.value for s in values if s is not None and s.value is not None]
            out[f"{p}/{a.name}/failures"] = float(n - len(ok))
            if ok:
                out[f"{p}/{a.name}/mean"] = sum(ok) / len(ok)
            details = [s.details for s in values if s is not None]
            masses = [d["mass"] for d in details if isinstance(d.get("mass"), (int, float))]
            if masses:  # G-Eval: probability that fell on valid scale values
                out[f"{p}/{a.name}/mass"] = sum(masses) / len(masses)
                out[f"{p}/{a.name}/mass_min"] = min(masses)
            entropies = [d["entropy"] for d in details if isinstance(d.get("entropy"), (int, float))]
            if entropies:
                out[f"{p}/{a.name}/entropy"] = sum(entropies) / len(entropies)
        if self.part is None:  # the main term the reward starts from, beside the judge's aspect means
            terms = [r.term["value"] for r in results if r.term]
            if terms:
                out[f"{p}/term/{self.reward.config.term}"] = sum(terms) / len(terms)
        if self.part in (None, GUARDS_PART):  # the guards function of per_aspect reuses the batch (seconds None)
            for name in self.reward.guards.enabled:  # what each guard charged, and how often
                charged = [r.components.get(f"guard/{name}") for r in results]
                charged = [c for c in charged if c is not None]
                if charged:
                    out[f"{p}/guard/{name}/penalty"] = sum(charged) / len(charged)
                    out[f"{p}/guard/{name}/rate"] = sum(c > 0 for c in charged) / len(charged)
        return out

    def _report(self, results, rewards, seconds, log_metric, log_extra, reasons) -> None:
        metrics = self.metrics(results, rewards, seconds)
        if log_metric is not None:
            for name, value in metrics.items():
                log_metric(name, value)
        else:  # trainers without log_metric (PPO, plain OnlineDPO): JudgeMetricsCallback drains these
            for name, value in metrics.items():
                self.record_metric(name, value)
        if log_extra is not None and self.config.log_columns:
            for a in self.aspects:
                log_extra(f"{self.log_prefix}/{a.name} ({self.method_name})", [r.scores[a.name].value if a.name in r.scores else None for r in results])
            if self.part in (None, GUARDS_PART):
                for name in self.reward.guards.enabled:
                    log_extra(f"{self.log_prefix}/guard {name}", [r.components.get(f"guard/{name}") for r in results])
            log_extra(f"{self.__name__} failure", reasons)

    def record_metric(self, name: str, value: float) -> None:
        """Keep a metric for :meth:`drain_metrics` (adapters that log outside ``log_metric``)."""
        with self._pending_lock:
            self._pending[name].append(float(value))

    def drain_metrics(self) -> dict[str, float]:
        """Means of the metrics recorded since the last drain (for trainers without ``log_metric``)."""
        with self._pending_lock:
            out = {k: sum(v) / len(v) for k, v in self._pending.items() if v}
            self._pending.clear()
        return out

    def stats(self) -> dict:
        return {
            "name": self.__name__, "calls": self.calls, "rows": self.rows, "seconds": self.seconds,
            "failures": dict(self.failures), "judge": self.judge.stats(),
        }


class AsyncJudgeReward(JudgeReward):
    """:class:`JudgeReward` as a coroutine, for API judges (``backend: {kind: openai}``).

    GRPO and RLOO (TRL 1.16) run every async reward function of a batch concurrently with
    ``asyncio.gather`` on their event-loop thread; the judge call itself runs in a worker thread
    (``asyncio.to_thread``) so several judges' network round trips overlap. Do not use it for two
    rewards on one local model: they would contend for the same CPU/GPU.
    """

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs):  # type: ignore[override]
        return await asyncio.to_thread(JudgeReward.__call__, self, prompts, completions, completion_ids, **kwargs)
