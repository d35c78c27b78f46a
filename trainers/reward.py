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
import math
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from judge_reward import Item, Judge, Score
from judge_reward.aspects import Aspect, ConfigError

NORMALISATIONS = ("none", "unit", "scale")
"""``none``: the judge's value untouched (GPTScore: mean log-prob <= 0; G-Eval/rating: aspect scale).
``unit``: mapped onto [0, 1] (G-Eval/rating: ``(v - low) / (high - low)``; GPTScore: ``exp(mean
log-prob)``, the geometric-mean probability the judge gives each token of the completion).
``scale``: the aspect's rating scale (G-Eval/rating: untouched; GPTScore: ``low + exp(mean
log-prob) * (high - low)``), so rewards from different methods are comparable."""

PARTIAL = ("fail", "renormalise")


@dataclass
class JudgeRewardConfig:
    """How judge scores become one reward per completion."""

    aspects: list[str] | None = None
    """Aspects to score; default: every aspect of the judge's config."""
    weights: dict[str, float] | None = None
    """Aspect -> weight of the combined reward (normalised to sum to 1); default: equal weights."""
    normalise: str = "unit"
    """One of :data:`NORMALISATIONS`."""
    method: str | None = None
    """Judge method to use (``gptscore``, ``geval``, ``rating``); default: the judge config's."""
    partial: str = "fail"
    """When some aspects of a completion fail: ``fail`` returns ``None``; ``renormalise`` averages
    the aspects that succeeded (re-weighted). A completion whose every aspect failed is always ``None``."""
    source_column: str = "source"
    """Dataset column with the text the completion is judged against (the article). When the batch
    has no such column, the prompt is used (the last user message of a conversational prompt)."""
    reference_column: str = "reference"
    """Dataset column with a human reference (needed by reference-based GPTScore directions)."""
    source_from_prompt: bool = True
    """Fall back to the prompt when ``source_column`` is absent; ``False`` makes that an error."""
    name: str | None = None
    """``__name__`` TRL logs the reward under (``rewards/<name>/mean``); default ``judge`` or ``judge_<aspect>``."""
    log_prefix: str = "judge"
    """Prefix of the judge diagnostics sent through ``log_metric`` (latency, per-aspect means and
    failures, G-Eval mass and entropy). Failed rewards are logged as ``rewards/<name>/failures``."""
    log_columns: bool = True
    """Add per-aspect scores and failure reasons to the completions table through ``log_extra``."""

    def __post_init__(self):
        if self.normalise not in NORMALISATIONS:
            raise ConfigError(f"reward.normalise: unknown value {self.normalise!r}; choose one of {NORMALISATIONS}")
        if self.partial not in PARTIAL:
            raise ConfigError(f"reward.partial: unknown value {self.partial!r}; choose one of {PARTIAL}")
        if self.aspects is not None and (not isinstance(self.aspects, list) or not self.aspects):
            raise ConfigError(f"reward.aspects: expected a non-empty list of aspect names, got {self.aspects!r}")
        if self.weights is not None:
            if not isinstance(self.weights, dict) or not self.weights:
                raise ConfigError(f"reward.weights: expected a mapping aspect -> weight, got {self.weights!r}")
            for aspect, w in self.weights.items():
                if not isinstance(w, (int, float)) or isinstance(w, bool) or not math.isfinite(w) or w < 0:
                    raise ConfigError(f"reward.weights.{aspect}: expected a non-negative number, got {w!r}")
            if sum(self.weights.values()) <= 0:
                raise ConfigError(f"reward.weights: at least one weight must be positive, got {self.weights!r}")


def message_text(value: Any, where: str) -> str:
    """The text of a completion or prompt in TRL's standard (str) or conversational (messages) format.

    For messages, the last message's content; content given as parts (``[{"type": "text", ...}]``)
    is joined.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        value = [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(m, dict) for m in value):
        return _content(value[-1], where)
    raise TypeError(f"{where}: expected text or a list of chat messages, got {type(value).__name__}: {value!r:.80}")


def prompt_source(prompt: Any, where: str) -> str:
    """What a prompt offers as the judge's source: the text, or the last user message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)) and prompt and all(isinstance(m, dict) for m in prompt):
        users = [m for m in prompt if m.get("role") == "user"]
        return _content(users[-1] if users else prompt[-1], where)
    raise TypeError(f"{where}: expected text or a list of chat messages, got {type(prompt).__name__}: {prompt!r:.80}")


def _content(message: dict, where: str) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: keep the text
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise TypeError(f"{where}.content: expected text or a list of parts, got {content!r:.80}")


class BatchScorer:
    """Scores a batch once for several reward functions that share a judge (one per aspect).

    TRL calls the functions of a batch one after another with the same rows; the first call scores
    every aspect any of them needs in one ``judge.score`` call, the others reuse the result.
    """

    def __init__(self, judge: Judge, method: str | None = None):
        self.judge = judge
        self.method = method
        self.aspects: list[str] = []
        self._last: tuple[tuple, list[dict[str, Score]]] | None = None
        self._lock = threading.Lock()

    def want(self, names: Sequence[str]) -> None:
        self.aspects.extend(n for n in names if n not in self.aspects)

    def score(self, items: list[Item]) -> tuple[list[dict[str, Score]], float | None]:
        """Scores per item, and the judge's wall seconds (``None`` when served from the last batch)."""
        key = tuple(items)
        with self._lock:
            if self._last is not None and self._last[0] == key:
                return self._last[1], None
            start = time.perf_counter()
            results = self.judge.score(items, aspects=self.aspects, method=self.method)
            seconds = time.perf_counter() - start
            self._last = (key, results)
            return results, seconds


class JudgeReward:
    """A reward function for TRL trainers backed by a :class:`~judge_reward.Judge`.

    >>> reward = JudgeReward(judge, JudgeRewardConfig(aspects=["coherence"], normalise="unit"))
    >>> trainer = GRPOTrainer(model=..., reward_funcs=reward, ...)   # logs rewards/judge_coherence/mean

    Returns one float per completion, or ``None`` where the judge failed (counted by reason in
    :attr:`failures` and logged as ``rewards/<name>/failures``).
    """

    def __init__(self, judge: Judge, config: JudgeRewardConfig | None = None, *, scorer: BatchScorer | None = None):
        self.judge = judge
        self.config = config or JudgeRewardConfig()
        names = self.config.aspects or judge.aspect_names
        self.aspects: list[Aspect] = [judge.aspect_set.get(n) for n in names]
        self.method_name = self.config.method or judge.config.method
        judge.method(self.method_name)  # validate the method's config section before training starts
        if self.method_name == "gptscore" and self.config.normalise != "none":
            reduce = judge.method("gptscore").config.reduce
            if reduce != "mean":
                raise ConfigError(
                    f"reward.normalise: {self.config.normalise!r} needs gptscore.reduce 'mean' (exp of a summed "
                    f"log-prob is a sequence probability, ~0 for any real text), got reduce {reduce!r}"
                )
        weights = self.config.weights or {a.name: 1.0 for a in self.aspects}
        unknown = sorted(set(weights) - {a.name for a in self.aspects})
        if unknown:
            raise ConfigError(f"reward.weights: aspect(s) {unknown} are not among the scored aspects {names}")
        total = sum(weights.get(a.name, 0.0) for a in self.aspects)
        if total <= 0:
            raise ConfigError(f"reward.weights: the scored aspects {names} all have weight 0")
        self.weights = {a.name: weights.get(a.name, 0.0) / total for a in self.aspects}
        default_name = "judge" if len(self.aspects) > 1 else f"judge_{self.aspects[0].name}"
        self.__name__ = self.config.name or default_name
        self.scorer = scorer or BatchScorer(judge, self.method_name)
        if self.scorer.method != self.method_name:
            raise ConfigError(f"reward.method: {self.method_name!r} differs from the shared scorer's {self.scorer.method!r}")
        self.scorer.want([a.name for a in self.aspects])
        self.failures: Counter[str] = Counter()
        self.calls = 0
        self.rows = 0
        self.seconds = 0.0
        self._pending: dict[str, list[float]] = defaultdict(list)
        self._pending_lock = threading.Lock()

    @classmethod
    def per_aspect(cls, judge: Judge, config: JudgeRewardConfig | None = None) -> list["JudgeReward"]:
        """One reward function per aspect, sharing one judge call per batch.

        Pass the list as ``reward_funcs`` and weigh aspects with TRL's ``reward_weights``. Note that
        TRL (1.16) sums weighted functions with ``nansum``: an aspect that failed for a row counts
        as 0 in that row's sum unless every function failed. With ``multi_objective_aggregation=
        "normalize_then_sum"`` that 0 is the group mean (neutral); see docs/trainers.md.
        """
        config = config or JudgeRewardConfig()
        if config.weights is not None:
            raise ConfigError("reward.weights: per-aspect rewards are weighted by TRL's reward_weights, not here")
        if config.name is not None:
            raise ConfigError("reward.name: per-aspect rewards are named judge_<aspect>; leave name unset")
        scorer = BatchScorer(judge, config.method or judge.config.method)
        names = config.aspects or judge.aspect_names
        out = []
        for name in names:
            sub = JudgeRewardConfig(**{**config.__dict__, "aspects": [name]})
            out.append(cls(judge, sub, scorer=scorer))
        return out

    # -- values ----------------------------------------------------------------------------------

    def normalise(self, value: float, aspect: Aspect) -> float:
        mode = self.config.normalise
        if mode == "none":
            return value
        if self.method_name == "gptscore":
            unit = math.exp(min(value, 0.0))  # mean token log-prob -> geometric-mean token probability
            return unit if mode == "unit" else aspect.scale.low + unit * (aspect.scale.high - aspect.scale.low)
        return aspect.scale.normalise(value) if mode == "unit" else value

    def combine(self, scores: dict[str, Score]) -> tuple[float | None, str | None]:
        """The reward of one completion, or ``None`` and the reason."""
        got, failed = {}, []
        for a in self.aspects:
            s = scores[a.name]
            if s.value is None or not math.isfinite(s.value):
                failed.append((a.name, s.reason or "non-finite score"))
            else:
                got[a.name] = self.normalise(s.value, a)
        if failed and (self.config.partial == "fail" or not got):
            name, reason = failed[0]
            return None, reason if len(self.aspects) == 1 else f"{name}: {reason}"
        mass = sum(self.weights[n] for n in got)
        if mass <= 0:
            return None, "every aspect that succeeded has weight 0"
        return sum(self.weights[n] * v for n, v in got.items()) / mass, None

    # -- the call TRL makes ---------------------------------------------------------------------

    def items(self, prompts: Sequence, completions: Sequence, columns: dict[str, Any]) -> list[Item]:
        if len(prompts) != len(completions):
            raise ValueError(f"prompts: {len(prompts)} prompts for {len(completions)} completions")
        n = len(completions)
        sources = columns.get(self.config.source_column)
        if sources is None and not self.config.source_from_prompt:
            raise ValueError(
                f"reward.source_column: the batch has no column {self.config.source_column!r} "
                f"(columns: {sorted(k for k in columns if not k.startswith(('log_', 'trainer_')))})"
            )
        references = columns.get(self.config.reference_column)
        for col, values in ((self.config.source_column, sources), (self.config.reference_column, references)):
            if values is not None and len(values) != n:
                raise ValueError(f"{col}: {len(values)} values for {n} completions")
        out = []
        for i in range(n):
            output = message_text(completions[i], f"completions[{i}]")
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
        scored, seconds = self.scorer.score(items)
        rewards, reasons = [], []
        for scores in scored:
            value, reason = self.combine(scores)
            rewards.append(value)
            reasons.append(reason)
            if reason is not None:
                self.failures[reason] += 1
        self.calls += 1
        self.rows += len(items)
        self.seconds += seconds or 0.0
        self._report(scored, rewards, seconds, log_metric, log_extra, reasons)
        return rewards

    # -- logging ---------------------------------------------------------------------------------

    def metrics(self, scored: list[dict[str, Score]], rewards: list, seconds: float | None) -> dict[str, float]:
        """Scalar diagnostics of one call (what goes to ``log_metric``)."""
        p, n = self.config.log_prefix, len(rewards)
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
            values = [s[a.name] for s in scored]
            ok = [s.value for s in values if s.value is not None]
            out[f"{p}/{a.name}/failures"] = float(len(values) - len(ok))
            if ok:
                out[f"{p}/{a.name}/mean"] = sum(ok) / len(ok)
            masses = [s.details["mass"] for s in values if isinstance(s.details.get("mass"), (int, float))]
            if masses:  # G-Eval: probability that fell on valid scale values
                out[f"{p}/{a.name}/mass"] = sum(masses) / len(masses)
                out[f"{p}/{a.name}/mass_min"] = min(masses)
            entropies = [s.details["entropy"] for s in values if isinstance(s.details.get("entropy"), (int, float))]
            if entropies:
                out[f"{p}/{a.name}/entropy"] = sum(entropies) / len(entropies)
        return out

    def _report(self, scored, rewards, seconds, log_metric, log_extra, reasons) -> None:
        metrics = self.metrics(scored, rewards, seconds)
        if log_metric is not None:
            for name, value in metrics.items():
                log_metric(name, value)
        else:  # trainers without log_metric (PPO, plain OnlineDPO): JudgeMetricsCallback drains these
            for name, value in metrics.items():
                self.record_metric(name, value)
        if log_extra is not None and self.config.log_columns:
            for a in self.aspects:
                log_extra(f"{a.name} ({self.method_name})", [s[a.name].value for s in scored])
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
