"""The ``reward:`` section of a judge config: how judge scores become one reward per item.

Its own module so that the judge can check a config's reward section when the config loads without
importing the reward (which imports the judge).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, Optional

from pydantic import Field

from .config import ConfigError, Expect, Section, Weight, build_section
from .guards import GuardsConfig

NORMALISATIONS = ("none", "unit", "scale")
# guards computed from the judge's token log-probabilities, after it scored (the others read the texts)
TOKEN_GUARDS = ("copy_credit", "information", "likelihood_floor")
FORM_METHODS = ("geval", "rating")  # methods that read their value from a form slot (value_echo)
"""``none``: the judge's value untouched (GPTScore: mean log-prob <= 0; G-Eval/rating: aspect scale).
``unit``: mapped onto [0, 1] (G-Eval/rating: ``(v - low) / (high - low)``; GPTScore: ``exp(mean
log-prob)``, the geometric-mean probability the judge gives each token of the completion).
``scale``: the aspect's rating scale (G-Eval/rating: untouched; GPTScore: ``low + exp(mean
log-prob) * (high - low)``), so rewards from different methods are comparable."""

PARTIAL = ("fail", "renormalise")

AspectWeights = Annotated[dict[str, Weight], Field(min_length=1), Expect("a mapping aspect -> weight")]
"""Aspect -> weight of a combined reward (the reward section's ``weights``, the service's override)."""


def check_weights(weights: dict[str, float] | None, field: str) -> None:
    if weights is not None and sum(weights.values()) <= 0:
        raise ConfigError(f"at least one weight must be positive, got {weights!r}", field=field)


@dataclass
class RewardConfig(Section):
    """How judge scores become one reward per item (the ``reward:`` section of a judge config)."""

    section_path: ClassVar[str] = "reward"

    aspects: Optional[Annotated[list[str], Field(min_length=1), Expect("a non-empty list of aspect names")]] = None
    """Aspects to score; default: every aspect of the judge's config."""
    weights: Optional[AspectWeights] = None
    """Aspect -> weight of the combined reward (normalised to sum to 1); default: equal weights."""
    normalise: Literal[NORMALISATIONS] = "unit"
    """One of :data:`NORMALISATIONS`."""
    method: Optional[str] = None
    """Judge method to use (``gptscore``, ``geval``, ``rating``); default: the judge config's."""
    partial: Literal[PARTIAL] = "fail"
    """When some aspects of an item fail: ``fail`` returns ``None``; ``renormalise`` averages
    the aspects that succeeded (re-weighted). An item whose every aspect failed is always ``None``."""
    guards: GuardsConfig = field(default_factory=GuardsConfig)
    """:class:`~judge_reward.guards.GuardsConfig` or its mapping form; default: no guard."""
    units: Literal["judge", "spread"] = "judge"
    """The unit of the guards' charges: ``judge`` (the judge's own: nats per token for GPTScore,
    scale points for G-Eval) or ``spread`` (multiples of the judge's spread on honest outputs,
    ``validated_with.spread``, which ``judge-reward validate`` measures): a config in spread units
    keeps each charge's size relative to the judge's own differences when the judge changes."""

    def check(self) -> None:
        check_weights(self.weights, "weights")

    @classmethod
    def from_dict(cls, raw: Any, where: str | None = None) -> "RewardConfig":
        return build_section(cls, raw, where)
