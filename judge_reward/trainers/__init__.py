"""TRL integration: the judge as a reward for GRPO, RLOO, OnlineDPO, DPO (labelled pairs) and PPO.

Public API (one file per integration, imported lazily so ``import judge_reward.trainers`` stays cheap and
does not need TRL's optional trainers until they are used):

* :class:`JudgeReward`, :class:`AsyncJudgeReward`, :class:`JudgeRewardConfig`: reward functions
  for ``reward_funcs`` (``judge_reward/trainers/reward.py``);
* :class:`JudgeOnlineDPOTrainer` (``judge_reward/trainers/online_dpo.py``);
* :class:`JudgeRewardModel`: the PPO reward-model adapter (``judge_reward/trainers/ppo.py``);
* :func:`label_pairs`, :class:`PairLabelConfig`: judge-labelled preference pairs for DPO
  (``judge_reward/trainers/pairs.py``);
* :class:`JudgeMetricsCallback`, :func:`attach_judge_metrics`, :class:`CorrelationCallback`
  (``judge_reward/trainers/callbacks.py``);
* :class:`ProbeCallback`, :class:`ProbeGateError`: reward-hacking probes before the first step
  (``judge_reward/trainers/probe_callback.py``);
* :class:`ScoreboardCallback`, :class:`ScoreboardGateError`: the validity and robustness scoreboard
  before the first step (``judge_reward/trainers/scoreboard_callback.py``).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "JudgeReward": "reward",
    "AsyncJudgeReward": "reward",
    "JudgeRewardConfig": "reward",
    "NORMALISATIONS": "reward",
    "JudgeOnlineDPOTrainer": "online_dpo",
    "JudgeRewardModel": "ppo",
    "label_pairs": "pairs",
    "PairLabeler": "pairs",
    "PairLabelConfig": "pairs",
    "generate_candidates": "pairs",
    "JudgeMetricsCallback": "callbacks",
    "attach_judge_metrics": "callbacks",
    "CorrelationCallback": "callbacks",
    "CorrelationCallbackConfig": "callbacks",
    "ProbeCallback": "probe_callback",
    "ProbeGateError": "probe_callback",
    "ScoreboardCallback": "scoreboard_callback",
    "ScoreboardGateError": "scoreboard_callback",
    "TrainRunConfig": "run",
    "run_training": "run",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
