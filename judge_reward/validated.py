"""Which judge a reward config was validated with, and what happens when it runs with another.

A reward's guard strengths are in its judge's units and its scoreboard numbers are that judge's
(docs/scoreboard.md). A config records the judge in ``validated_with``; a :class:`~judge_reward.reward.Reward`
built with another ``backend.model`` warns, or refuses, until the config is re-validated.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

from .backends.loading import DEFAULT_MODEL
from .config import ConfigError, PositiveFloat, Section

__all__ = ["OtherJudgeWarning", "ValidatedWith", "check_validated_judge", "judge_model", "other_judge_problem"]


class OtherJudgeWarning(UserWarning):
    """A reward built from a config validated with another judge (``validated_with.judge``)."""


@dataclass
class ValidatedWith(Section):
    """The judge a config's reward was validated with. The guards' strengths are in that judge's
    units (nats per token for GPTScore, scale points for G-Eval) and the scoreboard's numbers are its
    numbers; another judge spreads its scores differently, so a reward built with another
    ``backend.model`` warns (or, with ``on_other_judge: error``, refuses) until the config is
    re-validated with it (``judge-reward validate``) and this field names it."""

    section_path: ClassVar[str] = "validated_with"

    judge: str
    """The ``backend.model`` the reward was validated with."""
    scoreboard: Optional[str] = None
    """Where its scoreboard numbers are (a page, or the command that reproduces them)."""
    on_other_judge: Literal["warn", "error"] = "warn"
    """What a reward built with another judge does: an :class:`OtherJudgeWarning`, or a config error."""
    spread: Optional[PositiveFloat] = None
    """The judge's spread on honest outputs, in its units: the median over inputs of the standard
    deviation of its score among an input's rated outputs, as ``judge-reward validate`` reports it.
    A reward with ``units: spread`` charges its guards' strengths times this."""


def judge_model(config) -> str:
    """The model a config's backend names (the hf backend's default when it names none)."""
    model = config.backend.get("model")
    if model is None and config.backend.get("kind", "hf") == "hf":
        model = DEFAULT_MODEL
    return str(model)


def other_judge_problem(config) -> str | None:
    """Why a reward from ``config`` is not validated for its judge (``None`` when it is, or when the
    config records no ``validated_with``)."""
    validated = config.validated_with
    model = judge_model(config)
    if validated is None or validated.judge == model:
        return None
    where = config.source_file or "the judge config"
    return (f"{where}: validated_with.judge is {validated.judge!r} but backend.model is {model!r}; the reward's guard "
            f"strengths and scoreboard are that judge's. Run `judge-reward validate --config {where}` with this judge, "
            f"then set validated_with.judge: {model!r}")


def check_validated_judge(config) -> None:
    """Warn (:class:`OtherJudgeWarning`) or raise (``on_other_judge: error``) when the config's reward
    was validated with another judge."""
    problem = other_judge_problem(config)
    if problem is None:
        return
    if config.validated_with.on_other_judge == "error":
        raise ConfigError(problem, field="validated_with.judge")
    warnings.warn(problem, OtherJudgeWarning, stacklevel=3)
