"""Reward-hacking probes before training: :class:`ProbeCallback` runs :func:`judge_reward.probes.run_probes`
on ``on_train_begin`` with the trainer's own reward and can stop the run before its first step. ::

    reward = JudgeReward(judge)
    trainer = GRPOTrainer(model=..., reward_funcs=reward, ...)
    trainer.add_callback(ProbeCallback(reward, load_pairs("pairs.jsonl"), max_win_rate=0.1))
    trainer.train()   # raises ProbeGateError (no step taken) when a family's win rate is above 0.1

The probes are scored by the very :class:`~judge_reward.reward.Reward` the reward function computes
through (``JudgeReward.reward``), so they see the guards, weights and normalisation training uses.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from transformers import TrainerCallback

from judge_reward.methods.base import Item
from judge_reward.probes import ProbeReport, _check_families, run_probes
from judge_reward.reward import Reward

__all__ = ["ProbeCallback", "ProbeGateError"]

log = logging.getLogger(__name__)


class ProbeGateError(RuntimeError):
    """A probe family's win rate is above the gate; raised before training starts."""

    def __init__(self, failed: list[str], report: ProbeReport, max_win_rate: float, message: str | None = None):
        self.failed = failed
        self.report = report
        if message is None:
            rates = ", ".join(f"{f} {report.families[f].win_rate:.2f}" for f in failed)
            message = (f"reward-hacking probes: win rate above {max_win_rate:g} for {rates}; "
                       f"not training against this reward (see the probe table above)")
        super().__init__(message)


def _reward_of(reward) -> Reward:
    """The :class:`Reward` behind a JudgeReward, a list of per-aspect JudgeRewards, or a Reward."""
    if isinstance(reward, (list, tuple)):
        found = {id(r.reward): r.reward for r in reward if isinstance(getattr(r, "reward", None), Reward)}
        if len(found) != 1:
            raise TypeError(f"reward: expected reward functions that share one judge reward, found {len(found)}")
        return next(iter(found.values()))
    if isinstance(reward, Reward):
        return reward
    inner = getattr(reward, "reward", None)
    if isinstance(inner, Reward):
        return inner
    raise TypeError(f"reward: expected a JudgeReward or a judge_reward.reward.Reward, got {type(reward).__name__}")


class ProbeCallback(TrainerCallback):
    """Run the probe suite once before the first step; log the table; with ``stop_on_fail``, raise
    :class:`ProbeGateError` when a family's win rate is above ``max_win_rate``.

    ``reward``: the trainer's :class:`~judge_reward.trainers.reward.JudgeReward` (or its per-aspect list, or a
    :class:`Reward`); ``pairs``: real source/output pairs (:func:`judge_reward.probes.load_pairs`).
    The table goes to the log (and stderr); with ``out_dir`` the JSON, markdown and figure are
    written there; when a W&B run is active the tables and ``probes/<family>/win_rate`` go to it.
    ``task``: what the outputs are for (default: the task of the reward's aspects); it decides which
    wordings are fair outputs (:func:`judge_reward.probes.is_fair`), reported and not gated.
    """

    def __init__(self, reward, pairs: Sequence[Item], max_win_rate: float = 0.1, stop_on_fail: bool = True,
                 families: Sequence[str] | None = None, n_boot: int = 1000, seed: int = 0,
                 out_dir: str | Path | None = None, log_wandb: bool = True, progress: bool = False,
                 task: str | None = None):
        self.reward = _reward_of(reward)
        self.pairs = list(pairs)
        if not self.pairs:
            raise ValueError("pairs: give at least one source/output pair to probe")
        if not 0 <= max_win_rate <= 1:
            raise ValueError(f"max_win_rate: expected a number in [0, 1], got {max_win_rate!r}")
        self.families = _check_families(families)  # a typo fails here, not at train time
        self.max_win_rate = max_win_rate
        self.stop_on_fail = stop_on_fail
        self.n_boot = n_boot
        self.seed = seed
        self.out_dir = out_dir
        self.log_wandb = log_wandb
        self.progress = progress
        self.task = task
        self.report: ProbeReport | None = None

    def run(self, main_process: bool = True) -> ProbeReport:
        """Run the probes now (what ``on_train_begin`` does) and return the report; only the main
        process logs and writes files."""
        report = run_probes(self.reward, self.pairs, self.families, n_boot=self.n_boot, seed=self.seed,
                            progress=self.progress and main_process, task=self.task)
        self.report = report
        if not main_process:
            return report
        table = report.to_markdown(self.max_win_rate, variants=False)
        log.warning("%s", table)
        figure = None
        if self.out_dir is not None:
            figure = report.write(self.out_dir, self.max_win_rate).get("figure")
        if self.log_wandb:
            try:
                import wandb
            except ImportError:
                wandb = None
            if wandb is not None and wandb.run is not None:
                report.log_wandb(wandb.run, figure=figure)
        return report

    def on_train_begin(self, args, state, control, **kwargs):
        # Every process scores the probes (they are deterministic), so all of them stop together
        # instead of the others waiting forever for a main process that raised.
        report = self.run(main_process=state.is_world_process_zero)
        unmeasured = report.unmeasured()  # a judge that fails on every probe is not a gate passed
        if unmeasured:
            unmeasured = f"reward-hacking probes: {unmeasured}; not training against a reward the probes could not check"
        if unmeasured and self.stop_on_fail:
            raise ProbeGateError(sorted(report.families), report, self.max_win_rate, unmeasured)
        if unmeasured and state.is_world_process_zero:
            log.warning("%s (stop_on_fail=False: training anyway)", unmeasured)
        failed = report.failed(self.max_win_rate)
        if failed and self.stop_on_fail:
            raise ProbeGateError(failed, report, self.max_win_rate)
        if failed and state.is_world_process_zero:
            log.warning("reward-hacking probes: win rate above %g for %s (stop_on_fail=False: training anyway)",
                        self.max_win_rate, ", ".join(failed))
