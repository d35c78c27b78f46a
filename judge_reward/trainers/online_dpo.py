"""OnlineDPO (``trl.experimental.online_dpo``, TRL 1.16) with the judge in ``reward_funcs``.

``OnlineDPOTrainer`` works with a plain :class:`~judge_reward.trainers.reward.JudgeReward` as it is. Two things
in its reward path do not fit a judge, and :class:`JudgeOnlineDPOTrainer` changes only those:

* It passes reward functions no ``log_metric``, so judge latency, failures and G-Eval mass never
  reach the logs. Here functions get a ``log_metric`` whose values are averaged into each log row.
* It sums the functions' outputs with ``nansum``, so a ``None`` reward becomes **0**, and the pair
  is then decided by ``first >= second``. With GPTScore (log-probs < 0) a failed completion would
  *win* its pair. Here a completion that every function failed on loses its pair against a scored
  one (its reward is set just below the partner's, so the logged margin stays honest), and a pair
  where both failed keeps the batch's mean reward on both sides; both cases are counted
  (``rewards/unscorable_completions``, ``rewards/unscorable_pairs``). TRL offers no way to drop a
  pair from the loss short of rewriting ``training_step``, so a doubly failed pair still trains in
  an arbitrary direction: watch ``rewards/unscorable_pairs``.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections import defaultdict

import torch
from trl.experimental.online_dpo import OnlineDPOConfig, OnlineDPOTrainer

__all__ = ["JudgeOnlineDPOTrainer", "OnlineDPOConfig"]


async def _await(awaitable):
    return await awaitable


class _Recorder:
    """Wraps a reward function to keep its last output (TRL's nansum hides which rows failed)."""

    def __init__(self, func):
        self.func = func
        self.__name__ = getattr(func, "__name__", type(func).__name__)
        self.last: list | None = None

    def __call__(self, *args, **kwargs):
        out = self.func(*args, **kwargs)
        if inspect.isawaitable(out):  # OnlineDPO has no event loop for async rewards; run it here
            out = asyncio.run(_await(out))
        self.last = list(out)
        return out


class JudgeOnlineDPOTrainer(OnlineDPOTrainer):
    """:class:`OnlineDPOTrainer` that logs reward-function metrics and never lets a failed reward win."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._judge_metrics: dict[str, list[float]] = defaultdict(list)
        self.reward_funcs = [f if isinstance(f, torch.nn.Module) else _Recorder(f) for f in self.reward_funcs]

    def _log_judge_metric(self, name: str, value: float) -> None:
        self._judge_metrics[name].append(float(value))

    def _calculate_rewards_from_functions(self, prompts, completions, completion_ids_list, **reward_kwargs):
        reward_kwargs["log_metric"] = self._log_judge_metric
        total = super()._calculate_rewards_from_functions(prompts, completions, completion_ids_list, **reward_kwargs)
        outputs = [f.last for f in self.reward_funcs if isinstance(f, _Recorder)]
        if len(outputs) < len(self.reward_funcs):  # a model reward scores every row
            return total
        failed = torch.tensor(
            [all(out[i] is None or (isinstance(out[i], float) and math.isnan(out[i])) for out in outputs)
             for i in range(len(prompts))],
            device=total.device,
        )
        half = len(prompts) // 2  # rows i and i + half are the two completions of one prompt
        first, second = failed[:half], failed[half:]
        scored = total[~failed]
        neutral = scored.mean() if scored.numel() else torch.zeros((), device=total.device)
        total = total.clone()
        for i in range(half):
            j = i + half
            if first[i] and second[i]:
                total[i] = total[j] = neutral
            elif first[i]:
                total[i] = torch.nextafter(total[j], torch.tensor(-math.inf, device=total.device))
            elif second[i]:
                total[j] = torch.nextafter(total[i], torch.tensor(-math.inf, device=total.device))
        self._log_judge_metric("rewards/unscorable_completions", float(failed.sum()))
        self._log_judge_metric("rewards/unscorable_pairs", float((first & second).sum()))
        return total

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self._judge_metrics and "loss" in logs:  # training rows only
            for name, values in self._judge_metrics.items():
                logs[name] = sum(values) / len(values)
            self._judge_metrics.clear()
        super().log(logs, start_time)
