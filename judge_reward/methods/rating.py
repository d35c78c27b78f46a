"""Generating rating prompts: the judge writes its rating, we parse it and average the samples.

One prompt per item in the chosen style (:mod:`judge_reward.prompts.rating`), ``n`` samples at
``temperature`` (Chiang & Lee 2023 sample 20 at temperature 1), each parsed by
:func:`judge_reward.parsing.parse_rating`; the score is the mean of the ratings that parsed.
Unparsable samples are counted with their reasons, never turned into a number.

The ``direct_assessment`` (0-100) and ``stars`` (1-5) styles rate on their own scale; their mean
is mapped linearly onto the aspect's scale (0 -> low, 100 -> high), and ``details`` says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar, Literal, Optional, Sequence

from ..aspects import Aspect
from ..backends.base import GenerationRequest, JudgeBackend
from ..candidates import format_value
from ..config import ConfigError, NonNegativeFloat, PositiveInt, Section
from ..parsing import PARSER_VERSION, parse_samples
from ..prompts.rating import FORM_STYLES, STYLE_SCALES, STYLES, build_rating_prompt, rating_scale
from .base import Item, Score, config_fingerprint
from .common import fit_source

# New tokens each style needs when max_new_tokens is not set: a score, a score and a sentence,
# or an analysis before the rating (an analysis cut short has no rating to parse).
DEFAULT_MAX_NEW_TOKENS = {
    "score_only": 8,
    "free_text": 32,
    "rate_explain": 128,
    "analyze_rate": 256,
    "direct_assessment": 8,
    "stars": 8,
}


@dataclass
class RatingConfig(Section):
    """Settings of the generating rating method (a judge config's ``rating:`` section)."""

    section_path: ClassVar[str] = "rating"

    style: Literal[STYLES] = "rate_explain"
    """Prompt style, one of ``prompts.rating.STYLES``: score_only, free_text, rate_explain,
    analyze_rate, direct_assessment (0-100), stars (1-5)."""
    n: PositiveInt = 20
    """Samples per item; the score is the mean of those that parse."""
    temperature: NonNegativeFloat = 1.0
    """Sampling temperature (0 is greedy: then n > 1 repeats one answer)."""
    max_new_tokens: Optional[PositiveInt] = None
    """Tokens each sample may write; ``None`` takes the style's default (DEFAULT_MAX_NEW_TOKENS)."""
    with_reference: bool = False
    """Show the item's human reference in the prompt (under the aspect's ``reference_label``)."""
    use_aspect_steps: bool = False
    """List the aspect's evaluation steps in the prompt (the auto-CoT variants); form styles only."""
    seed: Optional[int] = 0
    """Sampling seed passed to the backend with every request (``None``: not reproducible)."""

    def check(self) -> None:
        if self.use_aspect_steps and self.style not in FORM_STYLES:
            raise ConfigError(
                f"style {self.style!r} takes no evaluation steps; only {', '.join(FORM_STYLES)} do",
                field="use_aspect_steps",
            )

    @property
    def new_tokens(self) -> int:
        return self.max_new_tokens if self.max_new_tokens is not None else DEFAULT_MAX_NEW_TOKENS[self.style]


def map_linear(value: float, source: tuple[float, float], target: tuple[float, float]) -> float:
    """Map ``value`` from the range ``source`` onto ``target`` linearly (ends onto ends)."""
    (s_low, s_high), (t_low, t_high) = source, target
    if s_high == s_low:
        raise ValueError(f"cannot map from the empty range {source!r}")
    return t_low + (value - s_low) * (t_high - t_low) / (s_high - s_low)


class RatingMethod:
    """Ask the judge for a rating in words, ``n`` times per item, and average what parses."""

    name = "rating"

    def __init__(self, config: RatingConfig | None = None):
        self.config = config or RatingConfig()

    def fingerprint(self) -> str:
        # The parser decides the score of a cached generation, so its version is part of the key.
        return config_fingerprint(self.name, {**asdict(self.config), "parser": PARSER_VERSION})

    def prompt_revision(self, aspect: Aspect) -> str:
        """Every task's template is at its first revision: nothing to add to the cache key."""
        return ""

    def prompt(self, aspect: Aspect, item: Item) -> str:
        """The prompt for one item (without any shortening of the source)."""
        steps = self._steps(aspect)
        return build_rating_prompt(self.config.style, aspect, item, steps, self.config.with_reference)

    def _steps(self, aspect: Aspect) -> tuple[str, ...] | None:
        if not self.config.use_aspect_steps:
            return None
        if not aspect.steps:
            raise ValueError(f"rating.use_aspect_steps: aspect {aspect.name!r} has no steps in its aspect file")
        return aspect.steps

    def _prepare(
        self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]
    ) -> list[tuple[str, int] | Exception]:
        """Per item: (prompt, source tokens cut to fit the context window), or why it cannot be judged."""
        out: list[tuple[str, int] | Exception] = []
        for item in items:
            if not item.output.strip():
                out.append(ValueError("output: empty text cannot be judged"))
                continue
            try:
                fitted, cut = fit_source(
                    backend, item, lambda it: self.prompt(aspect, it), extra_tokens=self.config.new_tokens
                )
                out.append((self.prompt(aspect, fitted), cut))
            except ValueError as err:  # a missing reference, a text too long for the window
                out.append(err)
        return out

    def score(self, backend: JudgeBackend, aspect: Aspect, items: Sequence[Item]) -> list[Score]:
        cfg = self.config
        self._steps(aspect)  # a configuration error is raised once, not repeated per item
        judge_scale = rating_scale(cfg.style, aspect)
        aspect_scale = (aspect.scale.low, aspect.scale.high)
        mapped = cfg.style in STYLE_SCALES and judge_scale != aspect_scale

        prepared = self._prepare(backend, aspect, items)
        scores: list[Score | None] = [None] * len(items)
        requests, where = [], []
        for i, p in enumerate(prepared):
            if isinstance(p, Exception):
                scores[i] = Score.failure(str(p))
                continue
            requests.append(
                GenerationRequest(
                    p[0], n=cfg.n, temperature=cfg.temperature, max_new_tokens=cfg.new_tokens, seed=cfg.seed
                )
            )
            where.append(i)
        results = backend.generate(requests) if requests else []
        if len(results) != len(requests):
            raise RuntimeError(
                f"backend {backend.model_id!r} answered {len(results)} of {len(requests)} generation requests"
            )

        for i, gen in zip(where, results):
            cut = prepared[i][1]  # type: ignore[index]
            if gen.error is not None:
                scores[i] = Score.failure(gen.error, **{**gen.details, "truncated_source_tokens": cut})
                continue
            texts = list(gen.texts or [])
            samples = parse_samples(texts, judge_scale, cfg.style)
            details = {
                "ratings": samples.ratings,
                "parsed": samples.parsed,
                "failed": len(texts) - samples.parsed,
                "failure_reasons": samples.failure_reasons,
                "rules": samples.rules,
                "responses": texts,
                "rating_scale": list(judge_scale),
                "truncated_source_tokens": cut,
            }
            if mapped:
                details["scale_mapping"] = (
                    f"linear: {format_value(judge_scale[0])}-{format_value(judge_scale[1])} "
                    f"-> {format_value(aspect_scale[0])}-{format_value(aspect_scale[1])}"
                )
            if samples.mean is None:
                scores[i] = Score.failure(f"no parsable rating in {len(texts)} samples", **details)
                continue
            value = map_linear(samples.mean, judge_scale, aspect_scale) if mapped else samples.mean
            scores[i] = Score(value, None, details)
        return scores  # type: ignore[return-value]
