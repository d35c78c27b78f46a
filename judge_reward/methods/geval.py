"""G-Eval (Liu et al. 2023): form filling, scored as the probability-weighted sum over the scale.

``exact`` mode reads P(value | prompt) for every value on the scale from the backend and returns
``sum p(s) * s`` over the normalised distribution, with the mass that fell on valid values and the
entropy. ``sampling`` mode samples ``n`` completions and averages the parsed ratings; it is chosen
explicitly, never used as a silent fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, Optional, Sequence

from ..aspects import Aspect
from ..backends.base import CandidateRequest, GenerationRequest, JudgeBackend
from ..candidates import distribution_summary
from ..config import ConfigError, Fraction, NonNegativeFloat, PositiveInt, Section
from ..prompts.geval import LAYOUTS, build_geval_prompt
from .base import Item, Score, config_fingerprint
from .common import fit_source, run_plans

MODES = ("exact", "sampling")
STEPS = ("auto", "manual", "none")


@dataclass
class GEvalConfig(Section):
    """G-Eval settings (a judge config's ``geval:`` section)."""

    section_path: ClassVar[str] = "geval"

    mode: Literal[MODES] = "exact"
    """``exact`` (probabilities of every scale value) or ``sampling`` (n generations, parsed and averaged)."""
    steps: Literal[STEPS] = "manual"
    """Evaluation steps: ``manual`` (the aspect file's ``steps``), ``auto`` (generated once, from ``steps_file``), ``none``."""
    steps_file: Optional[str] = None
    """YAML written by ``judge-reward steps`` (auto-CoT); required when ``steps: auto``."""
    layout: Literal[LAYOUTS] = "shared"
    """Prompt order (:data:`judge_reward.prompts.geval.LAYOUTS`): ``shared`` lists every aspect's
    criteria and steps before the source and puts the judged text between marker lines, so only the
    form line differs between aspects; ``guarded`` puts this aspect's criteria, steps and form after
    the fenced text; ``paper`` is the paper's order."""
    with_reference: bool = False
    """Show the item's human reference in the prompt."""
    min_mass: Fraction = 0.0
    """Fail an item (``None`` score) when less than this probability falls on valid scale values."""
    n: PositiveInt = 20
    """Samples per item in ``sampling`` mode (the paper uses 20 at temperature 1)."""
    temperature: NonNegativeFloat = 1.0
    max_new_tokens: PositiveInt = 8
    seed: Optional[int] = 0

    def check(self) -> None:
        if self.steps == "auto" and not self.steps_file:
            raise ConfigError("required when geval.steps is 'auto' (run `judge-reward steps` first)", field="steps_file")


class GEval:
    name = "geval"

    def __init__(self, config: GEvalConfig | None = None, panel: Sequence[Aspect] = ()):
        """``panel``: the aspects the ``shared`` layout lists in every prompt (a judge passes its
        aspects); an aspect scored outside it is listed after them in its own prompts."""
        self.config = config or GEvalConfig()
        self.panel = tuple(panel)
        self._steps: dict[str, tuple[str, ...]] | None = None

    def fingerprint(self) -> str:
        panel = [a.content_hash() for a in self.panel] if self.config.layout == "shared" else None
        return config_fingerprint(self.name, {"config": self.config, "steps": self._steps_store_digest(), "panel": panel})

    def prompt_revision(self, aspect: Aspect) -> str:
        """Every task's template is at its first revision: nothing to add to the cache key."""
        return ""

    def _steps_store_digest(self) -> str | None:
        if self.config.steps != "auto":
            return None
        from ..autocot import StepsStore

        return StepsStore.load(self.config.steps_file).digest()

    def steps_for(self, aspect: Aspect) -> tuple[str, ...]:
        if self.config.steps == "none":
            return ()
        if self.config.steps == "manual":
            return aspect.steps
        from ..autocot import StepsStore

        return StepsStore.load(self.config.steps_file).steps_for(aspect)

    def prompts(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]):
        """Per item: (prompt, source tokens cut) or the error that stops it."""
        steps = self.steps_for(aspect)
        panel = [(a, self.steps_for(a)) for a in self.panel] if self.config.layout == "shared" else ()
        build = lambda a_source, a_output, reference: build_geval_prompt(  # noqa: E731
            aspect, a_source, a_output, steps, reference, self.config.layout, panel)
        out = []
        for item in items:
            reference = item.reference if self.config.with_reference else None
            if self.config.with_reference and reference is None:
                out.append(ValueError("reference: geval.with_reference is set but the item has no reference"))
                continue
            if not item.output.strip():
                out.append(ValueError("output: empty text cannot be judged"))
                continue
            render = lambda it: build(it.source, it.output, reference).text  # noqa: E731
            try:
                fitted, cut = fit_source(backend, item, render, extra_tokens=self._extra_tokens())
            except ValueError as err:
                out.append(err)
                continue
            out.append((build(fitted.source, fitted.output, reference), cut))
        return out

    def _extra_tokens(self) -> int:
        return self.config.max_new_tokens if self.config.mode == "sampling" else 4

    def score(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]) -> list[Score]:
        return self.score_aspects(backend, [(aspect, items)])[0]

    def score_aspects(self, backend: JudgeBackend, work: Sequence[tuple[Aspect, Sequence[Item]]]) -> list[list[Score]]:
        """Scores for several (aspect, items) at once: in exact mode one backend call for all of them,
        so the rows of every aspect that share a prefix (task, source, the judged text in the guarded
        layout) are run together and the backend computes the shared part once."""
        if self.config.mode == "sampling":
            return [self._score_sampling(backend, aspect, self.prompts(backend, aspect, items)) for aspect, items in work]
        plans = [self._plan_exact(backend, aspect, items) for aspect, items in work]
        return run_plans(plans, backend.candidate_logprobs)

    def _plan_exact(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]):
        """(the candidate requests for ``items``, a function from their results to the Scores)."""
        prepared = self.prompts(backend, aspect, items)
        values = list(aspect.scale.values)
        texts = aspect.scale.texts
        requests, where = [], []
        scores: list[Score | None] = [None] * len(items)
        for i, p in enumerate(prepared):
            if isinstance(p, Exception):
                scores[i] = Score.failure(str(p))
                continue
            prompt, _ = p
            requests.append(CandidateRequest(prompt.text, texts, group=prompt.shared))
            where.append(i)

        def finish(results) -> list[Score]:
            for i, result in zip(where, results):
                cut = prepared[i][1]
                if result.error is not None:
                    scores[i] = Score.failure(result.error)
                    continue
                summary = distribution_summary(values, result.logprobs)
                details = {
                    "distribution": dict(zip(texts, summary["probs"])),
                    "mass": summary["mass"],
                    "entropy": summary["entropy"],
                    "truncated_source_tokens": cut,
                    **result.details,
                }
                if summary["score"] is None:
                    scores[i] = Score.failure("no probability on any scale value", **details)
                elif summary["mass"] < self.config.min_mass:
                    scores[i] = Score.failure(
                        f"only {summary['mass']:.4f} of the probability fell on the scale (min_mass {self.config.min_mass})",
                        **details,
                    )
                else:
                    scores[i] = Score(summary["score"], None, details)
            return scores  # type: ignore[return-value]

        return requests, finish

    def _score_sampling(self, backend, aspect, prepared) -> list[Score]:
        from ..parsing import parse_rating

        requests, where = [], []
        scores: list[Score | None] = [None] * len(prepared)
        for i, p in enumerate(prepared):
            if isinstance(p, Exception):
                scores[i] = Score.failure(str(p))
                continue
            requests.append(GenerationRequest(
                p[0].text, n=self.config.n, temperature=self.config.temperature,
                max_new_tokens=self.config.max_new_tokens, stop=("\n",), seed=self.config.seed,
            ))
            where.append(i)
        for i, gen in zip(where, backend.generate(requests)):
            if gen.error is not None:
                scores[i] = Score.failure(gen.error)
                continue
            parsed = [parse_rating(t, aspect.scale) for t in gen.texts]
            ratings = [p.value for p in parsed if p.value is not None]
            reasons: dict[str, int] = {}
            for p in parsed:
                if p.value is None:
                    reasons[p.reason] = reasons.get(p.reason, 0) + 1
            details = {"ratings": ratings, "failed": len(parsed) - len(ratings), "failure_reasons": reasons,
                       "responses": gen.texts, "truncated_source_tokens": prepared[i][1]}
            if not ratings:
                scores[i] = Score.failure(f"no parsable rating in {len(parsed)} samples", **details)
            else:
                scores[i] = Score(sum(ratings) / len(ratings), None, details)
        return scores  # type: ignore[return-value]
