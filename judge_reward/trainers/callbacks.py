"""Trainer callbacks: judge metrics for trainers without ``log_metric``, and judge-human correlation.

* :class:`JudgeMetricsCallback` puts the metrics a :class:`~judge_reward.trainers.reward.JudgeReward` (or a
  PPO :class:`~judge_reward.trainers.ppo.JudgeRewardModel`) recorded since the last log row into that row,
  for trainers that do not hand reward functions a ``log_metric`` (PPO, a plain OnlineDPO).
  GRPO and RLOO need no callback. Reporting callbacks (W&B) run in the order they were added and
  TRL adds them first, so use :func:`attach_judge_metrics`, which puts this callback in front.
* :class:`CorrelationCallback` is the meta-evaluation callback from
  :mod:`judge_reward.metaeval.callback`, re-exported: every N steps it scores a fixed human-rated
  probe set (e.g. 64 SummEval summaries) with the training judge and logs Spearman/Kendall/Pearson.
"""

from __future__ import annotations

from transformers import TrainerCallback

from judge_reward.metaeval.callback import CorrelationCallback, CorrelationCallbackConfig

__all__ = ["CorrelationCallback", "CorrelationCallbackConfig", "JudgeMetricsCallback", "attach_judge_metrics"]


class JudgeMetricsCallback(TrainerCallback):
    """Merge ``source.drain_metrics()`` of each source into every log row (and ``state.log_history``)."""

    def __init__(self, *sources):
        for k, s in enumerate(sources):
            if not callable(getattr(s, "drain_metrics", None)):
                raise TypeError(f"sources[{k}]: expected a JudgeReward or JudgeRewardModel, got {type(s).__name__}")
        self.sources = sources

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None:
            return
        extra = {}
        for source in self.sources:
            extra.update(source.drain_metrics())
        if not extra:
            return
        logs.update(extra)
        # Trainer.log appends a copy of the row to log_history before callbacks run
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(extra)


def attach_judge_metrics(trainer, *sources) -> JudgeMetricsCallback:
    """Add a :class:`JudgeMetricsCallback` ahead of the reporting callbacks, so W&B sees its metrics."""
    callback = JudgeMetricsCallback(*sources)
    trainer.callback_handler.callbacks.insert(0, callback)
    return callback
