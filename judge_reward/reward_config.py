"""The ``reward:`` section of a judge config: how judge scores become one reward per item.

Its own module so that the judge can check a config's reward section when the config loads without
importing the reward (which imports the judge).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, ClassVar, Literal, Optional

from pydantic import Field

from .config import ConfigError, Expect, Section, Weight, build_section
from .guards import CopyCreditGuard, GuardsConfig
from .wordlists import has_entry, languages
from .terms import TERMS, InformationTerm

NORMALISATIONS = ("none", "unit", "scale")
# guards computed from the judge's token log-probabilities, after it scored (the others read the texts)
TOKEN_GUARDS = ("copy_credit", "information", "likelihood_floor", "lift")
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
    """How judge scores become one reward per item (the ``reward:`` section of a judge config):
    ``reward = term - sum_g penalty_g``, the main term (:mod:`judge_reward.terms`) minus the guards'
    charges."""

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
    term: Literal[TERMS] = "judge"
    """What the reward starts from, one of :data:`~judge_reward.terms.TERMS`: ``judge``, the
    judge's weighted aspect score (normalised); ``information``, what the output says about its
    source (:class:`~judge_reward.terms.InformationTerm`, set in ``information``). Logged as the
    component ``term/<name>``."""
    information: Optional[InformationTerm] = None
    """The settings of ``term: information`` (:class:`~judge_reward.terms.InformationTerm`); default:
    its defaults. Only with ``term: information`` (``guards.information`` is a separate guard: a
    floor on the same quantity)."""
    guards: GuardsConfig = field(default_factory=GuardsConfig)
    """:class:`~judge_reward.guards.GuardsConfig` or its mapping form; default: no guard."""
    units: Literal["judge", "spread"] = "judge"
    """The unit of the guards' charges: ``judge`` (the judge's own: nats per token for GPTScore,
    scale points for G-Eval) or ``spread`` (multiples of the judge's spread on honest outputs,
    ``validated_with.spread``, which ``judge-reward validate`` measures): a config in spread units
    keeps each charge's size relative to the judge's own differences when the judge changes."""

    def check(self) -> None:
        check_weights(self.weights, "weights")
        self._read_contrast()
        if self.term == "information":
            if self.information is None:
                self.information = InformationTerm()
            info, ground = self.information, self.guards.grounding
            if info.near_copy_words and not has_entry("function_words", self.guards.language):
                raise ConfigError(f"near_copy_words reads the function words of {self.guards.language!r}, which "
                                  f"judge_reward/wordlists/function_words.yaml lacks (it has "
                                  f"{', '.join(languages('function_words'))}); add its key there",
                                  field="information.near_copy_words")
            if info.grounded_only and not (ground.enabled and ground.sentence_threshold is not None):
                raise ConfigError("grounded_only needs the grounding guard on with sentence_threshold set",
                                  field="information.grounded_only")
        elif self.information is not None:
            raise ConfigError(f"the information term's settings, but term is {self.term!r}; set term: information "
                              "(or remove the section)", field="information")

    def _read_contrast(self) -> None:
        """``guards.copy_credit`` with ``contrast: true`` was the information term spelt as a penalty
        (judge score - penalty = the information): read it as ``term: information``, same reward."""
        old = self.guards.copy_credit
        if not (old.enabled and old.contrast):
            return
        if self.term != "judge":
            raise ConfigError(f"contrast: true makes the reward the information, and term is already {self.term!r}; "
                              "remove guards.copy_credit", field="guards.copy_credit.contrast")
        if old.weight != 1.0:  # judge - w * (judge - information): a mix that term cannot spell
            raise ConfigError(f"contrast: true with a weight other than 1 (got {old.weight}) mixes the judge's score "
                              "with the information; use term: information (weight 1) or term: judge",
                              field="guards.copy_credit.weight")
        settings = {"min_fragment": old.min_fragment, "near_copy_words": old.near_copy_words,
                    "budget_tokens": old.budget_tokens, "grounded_only": old.grounded_only}
        shown = ", ".join(f"{k}: {'null' if v is None else str(v).lower()}" for k, v in settings.items())
        warnings.warn(f"reward.guards.copy_credit.contrast is deprecated: write `term: information` and "
                      f"`information: {{{shown}}}` in the reward section instead (the same reward)",
                      FutureWarning, stacklevel=2)
        self.term = "information"
        self.information = InformationTerm(**settings)
        self.guards = replace(self.guards, copy_credit=CopyCreditGuard())

    def source_readers(self) -> list[str]:
        """What compares the output with its source: ``term <name>`` when the main term reads the
        source, then the guards that do (:meth:`GuardsConfig.source_guards`)."""
        term = ["term information"] if self.term == "information" else []
        return term + self.guards.source_guards()

    @classmethod
    def from_dict(cls, raw: Any, where: str | None = None) -> "RewardConfig":
        return build_section(cls, raw, where)
