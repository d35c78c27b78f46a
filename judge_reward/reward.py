"""The reward: judge scores -> one number per item. The one place that decides it.

Everything that turns a judgment into what a policy is optimised against lives here and nowhere
else: which aspects count and with what weights, how each method's value is normalised, what the
reward starts from (its main term, :mod:`judge_reward.terms`), which guards apply
(:mod:`judge_reward.guards`), what a failure becomes, and how a chat prompt or
completion becomes the judge's source and output. The TRL reward functions (``judge_reward.trainers.reward``),
the reward service (``/get_reward``, ``/v1/score``), the bias audit, the probe suite and
``judge-reward score`` all call :class:`Reward`, so one config gives one number everywhere.

A judge config carries its reward in a ``reward:`` section (see ``configs/judges/default.yaml``)::

    reward:
      aspects: [coherence, consistency, fluency, relevance]
      weights: {coherence: 1, consistency: 1, fluency: 1, relevance: 1}
      normalise: none            # none | unit | scale
      partial: fail              # fail | renormalise
      term: judge                # judge | information (settings in `information:`)
      guards:
        copy: {enabled: true, min_fragment: 20, threshold: 0.3, weight: 1.0}
        ...

``reward = term - sum_g penalty_g``, or ``None`` with a reason when the judge failed. The term is
``judge`` (``sum_a w_a * normalise(score_a)``, weights summing to 1) or ``information`` (what the
output says about its source: :class:`~judge_reward.terms.InformationTerm`). Penalties are in the
reward's units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, Optional, Sequence

from pydantic import Field

from .aspects import Aspect
from .config import ConfigError, Expect, Section, Weight, build_section
from .guards import (
    GuardReport, GuardsConfig, InjectionPatterns, SourceStats, apply_guards, copied_token_mask, copy_credit,
    mask_values, needs_sentence_end, neutralise, sentence_lift, source_information, token_mask, token_span_index,
    unsupported_spans,
)
from .sentences import sentence_spans
from .judge import Judge, JudgeConfig, JudgeSections
from .methods.base import Item, Score
from .reward_config import (  # noqa: F401  (the reward's settings, re-exported where they were)
    FORM_METHODS, NORMALISATIONS, PARTIAL, TOKEN_GUARDS, AspectWeights, RewardConfig, check_weights,
)
from .validated import check_validated_judge

# -- chat messages -> judge input ---------------------------------------------------------------------


def _content(message: dict, where: str) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: keep the text
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise TypeError(f"{where}.content: expected text or a list of parts, got {content!r:.80}")


def _messages(value: Any) -> list[dict] | None:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(m, dict) for m in value):
        return list(value)
    return None


def _last_turn(value: Any, role: str, where: str) -> str:
    """The text itself, or the content of a chat's last ``role`` message (its last message when no
    message has that role)."""
    if isinstance(value, str):
        return value
    messages = _messages(value)
    if messages is None:
        raise TypeError(f"{where}: expected text or a list of chat messages, got {type(value).__name__}: {value!r:.80}")
    turns = [m for m in messages if m.get("role") == role]
    return _content(turns[-1] if turns else messages[-1], where)


def completion_text(value: Any, where: str = "completion") -> str:
    """The judged output of a completion: the text itself, or the last assistant message of a chat
    (the last message when none is marked ``assistant``); content given as parts is joined."""
    return _last_turn(value, "assistant", where)


def prompt_source(value: Any, where: str = "prompt") -> str:
    """What a prompt offers as the judge's source: the text, or the last user message of a chat."""
    return _last_turn(value, "user", where)


# -- the reward ---------------------------------------------------------------------------------------


@dataclass
class RewardResult:
    """One item's reward (``None`` with ``reason`` when the judge failed) and how it came about.

    ``components``: ``aspect/<name>`` (normalised value), ``term/<name>`` (the main term, what
    the reward starts from), ``guard/<name>`` (penalty, subtracted): ``value = term - sum(guard/*)``;
    ``scores``: the judge's Score per aspect; ``guards``: what each guard measured;
    ``judged_output``: the text the judge read when the injection guard rewrote it; ``term``: the
    main term's ``name``, ``value``, the judge's weighted score ``judge`` beside it, and what it
    measured (the information term: ``copied_token_share``).
    """

    value: float | None
    reason: str | None = None
    components: dict[str, float] = field(default_factory=dict)
    scores: dict[str, Score] = field(default_factory=dict)
    guards: dict[str, dict] = field(default_factory=dict)
    judged_output: str | None = None
    term: dict[str, Any] = field(default_factory=dict)


class Reward:
    """A judge plus a :class:`RewardConfig`: ``reward(items) -> [RewardResult]``, one judge call."""

    def __init__(self, judge, config: RewardConfig | dict | None = None):
        if config is None:
            config = getattr(judge.config, "reward", None)
        if not isinstance(config, RewardConfig):
            config = RewardConfig.from_dict(config or {})
        self.judge = judge
        self.config = config
        # A Judge, or a stand-in with ``aspects``, ``config.method`` and ``score`` (tests, audits).
        aspect_set = getattr(judge, "aspect_set", None)
        known = aspect_set.aspects if aspect_set is not None else {a.name: a for a in judge.aspects}
        names = config.aspects or [a.name for a in judge.aspects]
        if aspect_set is not None:
            try:
                self.aspects: list[Aspect] = [aspect_set.get(n) for n in names]  # its error names the aspect file's set
            except ConfigError as err:
                raise err.within("reward") from None
        else:
            unknown_aspects = [n for n in names if n not in known]
            if unknown_aspects:
                raise ConfigError(f"reward.aspects: unknown aspect(s) {unknown_aspects}; known: {sorted(known)}")
            self.aspects = [known[n] for n in names]
        if hasattr(judge, "backend") and getattr(getattr(judge, "config", None), "validated_with", None):
            check_validated_judge(judge.config)  # guard strengths are in the validating judge's units
        self.method_name = config.method or judge.config.method
        if callable(getattr(judge, "method", None)):
            judge.method(self.method_name)  # validate the method's config section before any scoring
        if self.method_name == "gptscore" and config.normalise != "none":
            reduce = judge.method("gptscore").config.reduce
            if reduce != "mean":
                raise ConfigError(
                    f"reward.normalise: {config.normalise!r} needs gptscore.reduce 'mean' (exp of a summed "
                    f"log-prob is a sequence probability, ~0 for any real text), got reduce {reduce!r}"
                )
        if any(a.task == "open_ended" for a in self.aspects):
            self._check_open_ended(judge, config)
        if config.term == "information":
            self._check_information_term(judge)
        for name in TOKEN_GUARDS:
            if getattr(config.guards, name).enabled:
                self._check_token_guard(name, judge, config)
        floor = config.guards.likelihood_floor
        if floor.enabled and floor.uncopied_only and not (floor.unconditional and (
                config.term == "information" or config.guards.copy_credit.enabled or config.guards.information.enabled)):
            raise ConfigError("uncopied_only needs unconditional: true and a copy mask (term information, or "
                              "copy_credit or information on)", field="reward.guards.likelihood_floor")
        if "ending" in config.guards.requiring("sentence_end") and (
                self.method_name != "gptscore" or any(a.task == "dialogue" for a in self.aspects)):
            raise ConfigError(f"mode 'judge' asks a GPTScore judge how likely a sentence ends after the output; "
                              f"got method {self.method_name!r}" + (" with dialogue aspects" if self.method_name == "gptscore" else ""),
                              field="reward.guards.ending")
        if config.guards.value_echo.enabled and self.method_name not in FORM_METHODS:
            raise ConfigError(f"needs a method that reads its value from a form ({', '.join(FORM_METHODS)}); "
                              f"{self.method_name!r} scores the text's own likelihood, which a written number does not "
                              "lift", field="reward.guards.value_echo")
        weights = config.weights or {a.name: 1.0 for a in self.aspects}
        unknown = sorted(set(weights) - {a.name for a in self.aspects})
        if unknown:
            raise ConfigError(f"reward.weights: aspect(s) {unknown} are not among the scored aspects {names}")
        total = sum(weights.get(a.name, 0.0) for a in self.aspects)
        if total <= 0:
            raise ConfigError(f"reward.weights: the scored aspects {names} all have weight 0")
        self.weights = {a.name: weights.get(a.name, 0.0) / total for a in self.aspects}
        self.guards: GuardsConfig = config.guards
        if config.units == "spread":  # the charges are multiples of the validating judge's spread
            validated = getattr(getattr(judge, "config", None), "validated_with", None)
            if validated is None or validated.spread is None:
                raise ConfigError("'spread' charges multiples of the judge's spread; set validated_with.spread "
                                  "to what `judge-reward validate` reports for this judge", field="reward.units")
            self.guards = config.guards.scaled(validated.spread)
        self._patterns = InjectionPatterns.for_aspects(known.values(), chatter=self.guards.injection.chatter,
                                                       language=self.guards.language)

    def _check_open_ended(self, judge, config: RewardConfig) -> None:
        """Open-ended aspects give the judge no source, so nothing may read one: a guard that compares
        the output with its source would compare it with whatever a caller passed in its place (a
        trainer's prompt), and a GPTScore direction other than ``src_hypo`` would score a reference
        the prompt never shows."""
        if config.term == "information":  # what the output says about its source: there is none
            raise ConfigError("'information' measures what the output says about its source, and open_ended aspects "
                              "read none; use term: judge", field="reward.term")
        for name in config.guards.requiring("source"):
            if name == "length":
                raise ConfigError(f"max_source_ratio {config.guards.length.max_source_ratio!r} measures the output "
                                  "against its source, and open_ended aspects read none; set max_source_ratio: null "
                                  "and cap the length with max_words", field="reward.guards.length.max_source_ratio")
            raise ConfigError(f"enabled: true, and {name} compares the output with its source, which open_ended "
                              f"aspects do not read; turn it off", field=f"reward.guards.{name}")
        if self.method_name == "gptscore" and callable(getattr(judge, "method", None)):
            direction = judge.method("gptscore").config.direction
            if direction != "src_hypo":
                raise ConfigError(f"open_ended aspects score the output after their instruction alone; direction "
                                  f"{direction!r} reads a reference the prompt never shows (use 'src_hypo')",
                                  field="gptscore.direction")

    @property
    def reads_source(self) -> bool:
        """Whether anything in this reward reads an item's source: False for GPTScore on open-ended
        aspects, whose prompt holds the output alone and whose guards may not read a source (the
        scoreboard then withholds it). G-Eval's form shows a source whenever an item has one."""
        return (self.method_name != "gptscore" or any(a.task != "open_ended" for a in self.aspects)
                or bool(self.config.source_readers()))

    def _check_information_term(self, judge) -> None:
        """``term: information`` reads GPTScore's token log-probabilities with and without the source
        (:attr:`InformationTerm.needs <judge_reward.terms.InformationTerm.needs>`)."""
        if self.method_name != "gptscore":
            raise ConfigError(f"'information' reads the judge's token log-probabilities and needs method 'gptscore', "
                              f"got method {self.method_name!r}", field="reward.term")
        if callable(getattr(judge, "method", None)) and not judge.method("gptscore").config.unconditional:
            raise ConfigError("'information' needs gptscore.unconditional: true in the judge config (the judge scores "
                              "each output without its source too), got false", field="reward.term")

    def _check_token_guard(self, name: str, judge, config: RewardConfig) -> None:
        """``copy_credit``, ``information`` and ``likelihood_floor`` read GPTScore's token log-probabilities
        (``GuardsConfig.reading_unconditional``: its source-free ones too)."""
        problem = None
        if self.method_name != "gptscore":
            problem = f"needs method 'gptscore' (it reads token log-probabilities), got {self.method_name!r}"
        elif config.normalise != "none":
            problem = f"needs normalise 'none' (the penalty is in nats per token), got {config.normalise!r}"
        elif (name in config.guards.reading_unconditional and callable(getattr(judge, "method", None))
              and not judge.method("gptscore").config.unconditional):
            problem = "needs gptscore.unconditional: true in the judge config (the judge scores each output without its source too)"
        if problem:
            raise ConfigError(problem, field=f"reward.guards.{name}")

    @classmethod
    def from_config(cls, path_or_config, backend=None, **overrides) -> "Reward":
        """Judge and reward from one judge config (its ``reward:`` section, with ``overrides``)."""
        config = JudgeConfig.load(path_or_config)
        check_reward(config, overrides)  # the reward's own checks, before the model loads
        judge = Judge(config, backend)
        raw = dict(judge.config.reward or {})
        raw.update(overrides)
        return cls(judge, RewardConfig.from_dict(raw))

    @property
    def aspect_names(self) -> list[str]:
        return [a.name for a in self.aspects]

    def use_inputs(self, sources: Sequence[str]) -> "Reward":
        """Tell the guards the task's inputs (``source`` texts): ``data_values.domain: inputs``
        reads the values they give (what an output for another input must not claim). The
        commands call it with the data they run on; call it with the training set's sources
        before training in Python. Returns the reward."""
        self.guards.data_values.use_inputs(sources)
        return self

    # -- values --------------------------------------------------------------------------------

    def normalise(self, value: float, aspect: Aspect) -> float:
        mode = self.config.normalise
        if mode == "none":
            return value
        if self.method_name == "gptscore":
            unit = math.exp(min(value, 0.0))  # mean token log-prob -> geometric-mean token probability
            return unit if mode == "unit" else aspect.scale.low + unit * (aspect.scale.high - aspect.scale.low)
        return aspect.scale.normalise(value) if mode == "unit" else value

    def combine(self, scores: dict[str, Score], guard: GuardReport | None = None,
                term: dict | None = None) -> RewardResult:
        """The reward of one item from its aspect scores, guard report and, under ``term:
        information``, what the term measured of it (``value`` and its statistics, from the item's
        texts and token log-probabilities: :meth:`RewardBatch.finish` passes it)."""
        got, failed = {}, []
        for a in self.aspects:
            s = scores.get(a.name)
            if s is None:  # a judge (a custom one) that returned no score for this aspect: a counted failure
                failed.append((a.name, "the judge returned no score for this aspect"))
            elif s.value is None or not math.isfinite(s.value):
                failed.append((a.name, s.reason or "non-finite score"))
            else:
                got[a.name] = self.normalise(s.value, a)
        components = {f"aspect/{n}": v for n, v in got.items()}
        guards = {}
        if guard is not None:
            components.update({f"guard/{n}": p for n, p in guard.penalties.items()})
            guards = {n: {**m, "penalty": guard.penalties.get(n, 0.0)} for n, m in guard.measured.items()}
        if failed and (self.config.partial == "fail" or not got):
            name, reason = failed[0]
            reason = reason if len(self.aspects) == 1 else f"{name}: {reason}"
            return RewardResult(None, reason, components, scores, guards)
        mass = sum(self.weights[n] for n in got)
        if mass <= 0:
            return RewardResult(None, "every aspect that succeeded has weight 0", components, scores, guards)
        judge = sum(self.weights[n] * v for n, v in got.items()) / mass
        name = self.config.term
        if name == "judge":
            measured = {"name": name, "value": judge}
        elif term is None:
            raise ValueError(f"reward.term {name!r} is read from the item's texts and the judge's token log-probabilities; "
                             "score items with the Reward (reward(items), or plan() and finish()), not combine() alone")
        else:
            measured = {"name": name, "value": term["value"], "judge": judge,
                        **{k: v for k, v in term.items() if k != "value"}}
        value = measured["value"]
        # the term before the charges, so that components read in order: aspects, term, guards
        guard_parts = {k: components.pop(k) for k in [k for k in components if k.startswith("guard/")]}
        components[f"term/{name}"] = value
        components.update(guard_parts)
        if guard is not None:
            value -= guard.total
        return RewardResult(value, None, components, scores, guards, term=measured)

    # -- scoring -------------------------------------------------------------------------------

    def prepare(self, items: Sequence[Item]) -> tuple[list[Item], list[list[str]]]:
        """The items the judge reads and the spans removed from each: under the injection guard the
        output in :func:`~judge_reward.guards.canonical` form without the spans that talk to the judge."""
        if not self.guards.injection.enabled:
            return list(items), [[] for _ in items]
        out, removed = [], []
        for item in items:
            judged, spans = neutralise(item.output, self._patterns)
            out.append(item if judged == item.output else Item(judged, item.source, item.reference, item.id))
            removed.append(spans)
        return out, removed

    def add_value_echo(self, report: GuardReport, scores: dict[str, Score], masked: dict[str, Score],
                       masked_count: int) -> str | None:
        """Charge what the written numbers added to each aspect (:class:`~judge_reward.guards.ValueEchoGuard`);
        the reason when the masked pass failed for an aspect the output was scored on, else None."""
        g = self.guards.value_echo
        lifts = {}
        for a in self.aspects:
            s, m = scores.get(a.name), masked.get(a.name)
            if s is None or s.value is None or not math.isfinite(s.value):
                continue  # the aspect failed: combine() fails the reward
            if m is None or m.value is None or not math.isfinite(m.value):
                why = (m.reason if m is not None else None) or "no score"
                return f"value_echo: the pass with the numbers masked failed for {a.name}: {why}"
            lifts[a.name] = self.normalise(s.value, a) - self.normalise(m.value, a)
        mass = sum(self.weights[n] for n in lifts)
        charged = sum(self.weights[n] * max(0.0, v - g.margin) for n, v in lifts.items()) / mass if mass > 0 else 0.0
        report.measured["value_echo"] = {"masked_values": masked_count, "lift": lifts}
        report.penalties["value_echo"] = g.weight * charged
        return None

    def guard_reports(self, items: Sequence[Item], removed: Sequence[Sequence[str]],
                      scored: Sequence[dict[str, Score]] | None = None) -> list[GuardReport | None]:
        """What every enabled guard measured and charged; ``copy_credit``, ``information`` and
        ``likelihood_floor`` also need the judge's ``scored`` results (the others read the texts alone)."""
        return [report for report, _ in self._assess(items, removed, scored)]

    def _assess(self, items: Sequence[Item], removed: Sequence[Sequence[str]],
                scored: Sequence[dict[str, Score]] | None = None) -> list[tuple[GuardReport | None, dict | None]]:
        """Per item: the guards' report (None with no guard on), and under ``term: information``
        what the term measured (None without ``scored`` or without a source to read)."""
        information = self.config.term == "information" and scored is not None
        if not self.guards.enabled and not information:
            return [(None, None)] * len(items)
        token_guards = any(getattr(self.guards, n).enabled for n in TOKEN_GUARDS)
        stats: dict[str, SourceStats] = {}
        out = []
        ends, end_failures = self._sentence_ends(items)
        for k, (item, spans) in enumerate(zip(items, removed)):
            source = None
            if item.source:
                source = stats.get(item.source) or stats.setdefault(item.source,
                                                                    SourceStats(item.source, self.guards.language))
            report = None
            if self.guards.enabled:
                report = apply_guards(self.guards, item.output, source, len(spans), ends.get(k))
                if k in end_failures:
                    report.failure = f"ending: the judge's sentence-end check failed: {end_failures[k]}"
            term = None
            if scored is not None and source is not None and (token_guards or information):
                term = self._read_tokens(report, item.output, source, scored[k])
            out.append((report, term))
        return out

    def _sentence_ends(self, items: Sequence[Item]) -> tuple[dict[int, float], dict[int, str]]:
        """``ending.mode: judge``: the judge's sentence-end probability of each item that needs one
        (:func:`~judge_reward.guards.needs_sentence_end`), and the reasons of those it could not give."""
        if "ending" not in self.guards.requiring("sentence_end"):
            return {}, {}
        ask = [k for k, item in enumerate(items) if needs_sentence_end(item.output, self.guards.language)]
        if not ask:
            return {}, {}
        got = self.judge.sentence_end([items[k] for k in ask], self.aspects[0].name)
        ends = {k: s.value for k, s in zip(ask, got) if s.value is not None}
        return ends, {k: s.reason or "no value" for k, s in zip(ask, got) if s.value is None}

    def _read_tokens(self, report: GuardReport | None, output: str, source: SourceStats,
                     scores: dict[str, Score]) -> dict | None:
        """What reads each aspect's token log-probabilities, as weighted means over the aspects (every
        aspect scores the same output tokens after its own instruction): the token guards, charged
        into ``report``, and under ``term: information`` the term, returned (``value`` and its
        statistics; None under another term)."""
        term = self.config.information if self.config.term == "information" else None
        per_aspect: dict[str, dict[str, float]] = {name: {} for name in TOKEN_GUARDS}
        information: dict[str, float] = {}  # the information term per aspect
        masks: dict[tuple[int, int] | str, list[bool]] = {}  # every aspect scores the same output tokens
        sentence_of_token: list[int] | None = None  # lift: each token's sentence, the same for every aspect

        def copied_mask(token_texts: list[str], min_fragment: int, near_copy_words: int) -> list[bool]:
            if (min_fragment, near_copy_words) not in masks:
                masks[min_fragment, near_copy_words] = copied_token_mask(
                    token_texts, " " + output.strip(), source, min_fragment, near_copy_words)
            return masks[min_fragment, near_copy_words]

        def unsupported_mask(token_texts: list[str], g) -> list[bool]:
            """With ``g.grounded_only``: the tokens of the sentences grounding finds unsupported."""
            if not g.grounded_only:
                return [False] * len(token_texts)
            if "unsupported" not in masks:
                ground = self.guards.grounding
                masks["unsupported"] = token_mask(token_texts, unsupported_spans(
                    " " + output.strip(), source.word_set, ground.min_chars, ground.sentence_threshold,
                    ground.skip_function_words, self.guards.language))
            return masks["unsupported"]

        def no_information_mask(token_texts: list[str], g) -> list[bool]:
            """The tokens that earn no information: copied ones, and with ``grounded_only`` unsupported ones."""
            copied_tokens = copied_mask(token_texts, g.min_fragment, g.near_copy_words)
            return [c or u for c, u in zip(copied_tokens, unsupported_mask(token_texts, g))]

        def shares(token_texts: list[str], g) -> dict[str, float]:
            """The share of the output's tokens that are copied (and with ``grounded_only`` unsupported)."""
            n = len(token_texts)
            out = {"copied_token_share": sum(copied_mask(token_texts, g.min_fragment, g.near_copy_words)) / n if n else 0.0}
            if g.grounded_only:
                out["unsupported_token_share"] = sum(unsupported_mask(token_texts, g)) / n if n else 0.0
            return out

        copied = unsupported = 0.0
        term_shares: dict[str, float] = {}
        shortfall: dict[str, float] = {}  # likelihood_floor.per_token: the summed shortfall per budget token
        own_share: dict[str, float] = {}  # likelihood_floor.uncopied_only: the share of tokens that are the output's own
        budget_mean: dict[str, float] = {}  # likelihood_floor.budget_tokens: the same two over the budget's tokens
        budget_share: dict[str, float] = {}
        idle_sentences: dict[str, int] = {}  # lift: the sentences that say nothing about the source
        readers = (["term information"] if term is not None else []) + self.guards.reading_unconditional
        for a in self.aspects:
            score = scores.get(a.name)
            if score is None or score.value is None:
                continue  # a failed aspect fails the reward in combine()
            tokens = score.tokens
            if not readers:
                per_aspect["likelihood_floor"][a.name] = score.value
                continue
            if tokens is None:
                # never a silent 0: a score without its token log-probabilities cannot be charged
                raise RuntimeError(f"reward: {', '.join(readers)} need the judge's token log-probabilities, "
                                   f"with and without the source (Score.tokens); the {a.name} score has none "
                                   "(gptscore.unconditional off, or a score that did not come from this judge)")
            cond, uncond, texts = tokens.with_source, tokens.without_source, tokens.texts
            if term is not None:
                information[a.name] = term.value(tokens, no_information_mask(texts, term))
                term_shares = shares(texts, term)  # the same tokens for every aspect
            floor = self.guards.likelihood_floor
            if "likelihood_floor" in readers and floor.uncopied_only:
                # the mask of the copies that earn no information: the term's, else a guard's
                g = term or (self.guards.copy_credit if self.guards.copy_credit.enabled else self.guards.information)
                mask = copied_mask(texts, g.min_fragment, g.near_copy_words)
                # grounded_only: unsupported sentences are no part of the output's own words, nor of
                # the tokens its shortfall is weighed against (an opener must not dilute the share)
                skip = unsupported_mask(texts, g)
                own_at = [k for k, (m, u, t) in enumerate(zip(mask, skip, texts))
                          if not m and not u and any(ch.isalnum() for ch in t)]
                own = [uncond[k] for k in own_at]
                if own:  # nothing of its own: no floor to charge (the information is 0)
                    per_aspect["likelihood_floor"][a.name] = sum(own) / len(own)
                    own_share[a.name] = len(own) / (len(mask) - sum(skip))
                if floor.budget_tokens is not None:  # the same over the tokens that earn information
                    read = min(len(mask), floor.budget_tokens)
                    head = [uncond[k] for k in own_at if k < read]
                    if floor.per_token:  # charged instead of the budget's mean below
                        shortfall[a.name] = sum(max(0.0, floor.floor - lp) for lp in head) / floor.budget_tokens
                    elif head:
                        budget_mean[a.name] = sum(head) / len(head)
                        budget_share[a.name] = len(head) / (read - sum(skip[:read]))
            else:
                per_aspect["likelihood_floor"][a.name] = (sum(uncond) / len(uncond) if "likelihood_floor" in readers and uncond
                                                          else score.value)
            if self.guards.copy_credit.enabled:
                g = self.guards.copy_credit
                m = copied_mask(texts, g.min_fragment, g.near_copy_words)
                copied = sum(m) / len(m) if m else 0.0
                unsupported = sum(unsupported_mask(texts, g)) / len(m) if m else 0.0
                # (its old contrast form is the information term now: RewardConfig reads it as that)
                per_aspect["copy_credit"][a.name] = copy_credit(cond, uncond, no_information_mask(texts, g))
            if self.guards.information.enabled:
                g = self.guards.information
                m = no_information_mask(texts, g)
                per_aspect["information"][a.name] = source_information(cond, uncond, m, g.budget_tokens)
            if self.guards.lift.enabled:
                if sentence_of_token is None:
                    sentence_of_token = token_span_index(texts, sentence_spans(" " + output.strip(), self.guards.language))
                lift, idle = sentence_lift(cond, uncond, sentence_of_token, self.guards.lift.min_information)
                per_aspect["lift"][a.name] = lift
                idle_sentences[a.name] = idle

        def weighted(values: dict[str, float]) -> float:
            mass = sum(self.weights[n] for n in values)
            return sum(self.weights[n] * v for n, v in values.items()) / mass if mass > 0 else 0.0

        if self.guards.copy_credit.enabled:
            credit = weighted(per_aspect["copy_credit"])
            report.measured["copy_credit"] = {"credit": credit, "copied_token_share": copied}
            if self.guards.copy_credit.grounded_only:
                report.measured["copy_credit"]["unsupported_token_share"] = unsupported
            report.penalties["copy_credit"] = self.guards.copy_credit.weight * credit
        if self.guards.information.enabled:
            g = self.guards.information
            info = weighted(per_aspect["information"])
            report.measured["information"] = {"nats_per_budget_token": info}
            report.penalties["information"] = g.weight * max(0.0, g.floor - info)
        if self.guards.lift.enabled:
            lift = weighted(per_aspect["lift"])
            report.measured["lift"] = {"lift": lift, "idle_sentences": max(idle_sentences.values(), default=0)}
            report.penalties["lift"] = self.guards.lift.weight * lift
        if self.guards.likelihood_floor.enabled:
            g = self.guards.likelihood_floor
            if g.per_token:  # each own token's shortfall over the budget: readable words cannot offset it
                report.measured["likelihood_floor"] = {"shortfall_per_budget_token": weighted(shortfall)}
                report.penalties["likelihood_floor"] = g.weight * report.measured["likelihood_floor"]["shortfall_per_budget_token"]
            elif per_aspect["likelihood_floor"]:
                mean = weighted(per_aspect["likelihood_floor"])
                report.measured["likelihood_floor"] = {"mean_logprob": mean}
                # uncopied_only: the shortfall weighs as much as the output's own words do, so that a
                # mostly copied text is not charged more than a wholly copied one (which pays nothing)
                share = weighted(own_share) if g.uncopied_only else 1.0
                if g.uncopied_only:
                    report.measured["likelihood_floor"]["own_token_share"] = share
                report.penalties["likelihood_floor"] = g.weight * max(0.0, g.floor - mean) * share
                if budget_mean:  # the floor holds over the budget too: readable text after it cannot lift it
                    head, head_share = weighted(budget_mean), weighted(budget_share)
                    report.measured["likelihood_floor"].update(budget_mean_logprob=head, budget_own_token_share=head_share)
                    report.penalties["likelihood_floor"] = max(report.penalties["likelihood_floor"],
                                                               g.weight * max(0.0, g.floor - head) * head_share)
            else:  # uncopied_only and every token copied
                report.measured["likelihood_floor"] = {"mean_logprob": None}
                report.penalties["likelihood_floor"] = 0.0
        if term is None:
            return None
        return {"value": weighted(information), **term_shares}

    def plan(self, items: Sequence[Item]) -> "RewardBatch":
        """Guard the inputs of a batch; :attr:`RewardBatch.to_judge` is what the judge must score.

        Callers that reach the judge their own way (the service's batcher) use this pair:
        ``batch = reward.plan(items)``, score ``batch.to_judge``, then ``batch.finish(scores)``.
        """
        judged, removed = self.prepare(items)
        return RewardBatch(self, list(items), judged, removed)

    def __call__(self, items: Sequence[Item]) -> list[RewardResult]:
        batch = self.plan(items)
        todo = batch.to_judge
        scored = self.judge.score(todo, aspects=self.aspect_names, method=self.method_name) if todo else []
        return batch.finish(scored)

    def describe(self) -> dict:
        return {
            "method": self.method_name, "aspects": self.aspect_names, "weights": self.weights,
            "normalise": self.config.normalise, "partial": self.config.partial, "term": self.config.term,
            "guards": self.guards.enabled,
        }


def check_reward(config: JudgeConfig, overrides: dict | None = None, reward: RewardConfig | None = None) -> None:
    """What :class:`Reward` checks of a judge config's ``reward:`` section (with ``overrides``), or of
    the ``reward`` config given, against the judge's aspects and method sections (reward.aspects,
    reward.weights, the token guards' needs), without loading the model. Raises ``ConfigError``
    naming the config's file."""
    try:
        if reward is None:
            reward = RewardConfig.from_dict({**(config.reward or {}), **(overrides or {})})
        Reward(JudgeSections(config), reward)
    except ConfigError as err:
        raise err.within(file=config.source_file or "") from None


class RewardBatch:
    """One batch between :meth:`Reward.plan` and :meth:`finish`: the guarded items, which of them
    reach the judge (an item the injection guard emptied does not), the copies with their numbers
    masked that the value-echo guard also needs scored, and the guard reports."""

    def __init__(self, reward: Reward, items: list[Item], judged: list[Item], removed: list[list[str]]):
        self.reward = reward
        self.items = items
        self.judged = judged
        self.removed = removed
        self.todo = [k for k, item in enumerate(judged) if not (removed[k] and not item.output.strip())]
        self.masked: dict[int, tuple[Item, int]] = {}  # todo index -> (masked item, values masked)
        if reward.guards.value_echo.enabled:
            for k in self.todo:
                text, count = mask_values(judged[k].output, reward.guards.language)
                if count:
                    j = judged[k]
                    self.masked[k] = (Item(text, j.source, j.reference, j.id), count)

    @property
    def guarded_items(self) -> list[Item]:
        """The guarded items that reach the judge."""
        return [self.judged[k] for k in self.todo]

    @property
    def masked_items(self) -> list[Item]:
        """The value-echo guard's copies of them with their numbers masked."""
        return [m for m, _ in self.masked.values()]

    @property
    def to_judge(self) -> list[Item]:
        """The guarded items, then their masked copies: score all of them, in this order."""
        return self.guarded_items + self.masked_items

    def finish(self, scored: Sequence[dict[str, Score]]) -> list[RewardResult]:
        """Results in input order from the judge's scores of :attr:`to_judge`."""
        if len(scored) != len(self.todo) + len(self.masked):
            raise RuntimeError(f"judge returned {len(scored)} results for {len(self.todo) + len(self.masked)} items")
        masked_scores = dict(zip(self.masked, scored[len(self.todo):]))
        scored = scored[:len(self.todo)]
        results: list[RewardResult | None] = [None] * len(self.judged)
        for k, spans in enumerate(self.removed):
            if k not in self.todo:  # nothing but text addressed to the judge: nothing to score
                results[k] = RewardResult(
                    None, f"nothing left to judge: the injection guard removed all {len(spans)} span(s)",
                    guards={"injection": {"removed_spans": len(spans), "removed": list(spans)}}, judged_output="",
                )
        assessed = self.reward._assess(self.guarded_items, [self.removed[k] for k in self.todo], scored)
        for k, scores, (report, term) in zip(self.todo, scored, assessed):
            failed = None
            if k in self.masked:
                failed = self.reward.add_value_echo(report, scores, masked_scores[k], self.masked[k][1])
            if term is None and self.reward.config.term != "judge":  # the term reads the source
                result = RewardResult(None, f"reward.term {self.reward.config.term!r}: the item has no source "
                                            "(the information is what the output says about its source)",
                                      scores=scores, guards={} if report is None else dict(report.measured))
            else:
                result = self.reward.combine(scores, report, term)
            failed = failed or (report.failure if report is not None else None)
            if failed is not None and result.value is not None:
                result = RewardResult(None, failed, result.components, result.scores, result.guards, term=result.term)
            if self.judged[k].output != self.items[k].output:
                result.judged_output = self.judged[k].output
            if self.removed[k]:
                result.guards.setdefault("injection", {})["removed"] = list(self.removed[k])
            results[k] = result
        return results  # type: ignore[return-value]
