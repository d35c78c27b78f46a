"""judge-reward: LLM-as-judge metrics (G-Eval, GPTScore, rating prompts) as RLHF rewards."""

from .aspects import Aspect, AspectSet, ConfigError, Scale, load_aspects
from .judge import Judge, JudgeConfig
from .methods.base import Item, Score
from .methods.geval import GEval, GEvalConfig
from .methods.gptscore import GPTScore, GPTScoreConfig
from .reward import Reward, RewardConfig
from .scoreboard import Scoreboard, ScoreboardSettings, validate

__all__ = [
    "Aspect", "AspectSet", "ConfigError", "GEval", "GEvalConfig", "GPTScore", "GPTScoreConfig",
    "Item", "Judge", "JudgeConfig", "Reward", "RewardConfig", "Scale", "Score", "Scoreboard", "ScoreboardSettings",
    "load_aspects", "validate",
]
__version__ = "0.1.0"
