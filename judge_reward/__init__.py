"""judge-reward: LLM-as-judge metrics (G-Eval, GPTScore, rating prompts) as RLHF rewards.

The public API, all importable from ``judge_reward``:

* the judge: :class:`Judge` (:class:`JudgeConfig`), the texts it scores (:class:`Item`) and its
  :class:`Score`; the methods (:class:`GEval`, :class:`GPTScore`) and aspects (:func:`load_aspects`);
* the reward: :class:`Reward` (:class:`RewardConfig`), a judge's scores as one number per completion;
* the scoreboard: :func:`validate` (:class:`ScoreboardSettings`) -> :class:`Scoreboard`, a reward's
  validity and robustness side by side;
* the TRL reward functions for ``reward_funcs``: :class:`JudgeReward`, :class:`AsyncJudgeReward`
  (:class:`JudgeRewardConfig`; from :mod:`judge_reward.trainers`) and :class:`ServiceRewardFunction`
  (:class:`ServiceRewardConfig`; a reward from ``judge-reward serve``, needs the ``openai`` or
  ``serve`` extra's httpx). These load on first use, so ``import judge_reward`` imports neither TRL
  nor the trainer integration.

The rest (the trainer callbacks, PPO and DPO adapters, the bias audit, the service) lives in its
subpackage: :mod:`judge_reward.trainers`, :mod:`judge_reward.bias_audit`, :mod:`judge_reward.service`.
"""

from importlib import import_module

from .aspects import Aspect, AspectSet, ConfigError, Scale, load_aspects
from .judge import Judge, JudgeConfig
from .methods.base import Item, Score, TokenLogprobs
from .methods.geval import GEval, GEvalConfig
from .methods.gptscore import GPTScore, GPTScoreConfig
from .reward import Reward, RewardConfig
from .scoreboard import Scoreboard, ScoreboardSettings, validate

# Loaded on first use (module __getattr__): the TRL integration is a consumer of this engine, which
# imports none of it (tests/test_package_direction.py), and the service client needs httpx.
_LAZY = {
    "JudgeReward": "judge_reward.trainers.reward",
    "AsyncJudgeReward": "judge_reward.trainers.reward",
    "JudgeRewardConfig": "judge_reward.trainers.reward",
    "ServiceRewardFunction": "judge_reward.service.client",
    "ServiceRewardConfig": "judge_reward.service.config",
}

__all__ = [
    "Aspect", "AspectSet", "AsyncJudgeReward", "ConfigError", "GEval", "GEvalConfig", "GPTScore", "GPTScoreConfig",
    "Item", "Judge", "JudgeConfig", "JudgeReward", "JudgeRewardConfig", "Reward", "RewardConfig", "Scale", "Score",
    "Scoreboard", "ScoreboardSettings", "ServiceRewardConfig", "ServiceRewardFunction", "TokenLogprobs", "load_aspects",
    "validate",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
