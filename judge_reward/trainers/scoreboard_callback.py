"""The reward scoreboard before training: :class:`ScoreboardCallback` runs
:func:`judge_reward.scoreboard.validate` on ``on_train_begin`` with the trainer's own reward and can
stop the run before its first step when the reward does not rank real outputs as people do, or a
manipulation beats real answers too often. ::

    from judge_reward.metaeval.datasets import load_summeval, load_references
    data = load_summeval("summeval.json", "references.json")
    reward = JudgeReward(judge)
    trainer = GRPOTrainer(model=..., reward_funcs=reward, ...)
    trainer.add_callback(ScoreboardCallback(reward, data, load_references("references.json"),
                                            min_agreement=0.2, max_win_rate=0.1))
    trainer.train()   # raises ScoreboardGateError (no step taken) when a gate fails

With a judgment cache on disk (``cache.path`` in the judge config) a second run replays the judge's
scores, so the gate costs seconds.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from transformers import TrainerCallback

from judge_reward.scoreboard import Scoreboard, ScoreboardSettings, flat, validate, write

from .probe_callback import _reward_of

__all__ = ["ScoreboardCallback", "ScoreboardGateError"]

log = logging.getLogger(__name__)


class ScoreboardGateError(RuntimeError):
    """The reward failed the scoreboard's gate; raised before training starts."""

    def __init__(self, failed: list[str], board: Scoreboard):
        self.failed = failed
        self.board = board
        super().__init__("reward scoreboard: " + "; ".join(failed) + "; not training against this reward")


class ScoreboardCallback(TrainerCallback):
    """Run the validity and robustness scoreboard once before the first step; log it; raise
    :class:`ScoreboardGateError` when a gate given fails (with ``stop_on_fail``).

    Args:
        reward: the trainer's :class:`~judge_reward.trainers.reward.JudgeReward` (or its per-aspect list, or a Reward).
        dataset: a human-rated :class:`~judge_reward.metaeval.datasets.MetaEvalDataset`.
        references: group -> human references (for ROUGE and the attacks); None: the attacks run on the
            output people rated best for each input (``settings.probe_groups=0``: none).
        settings: how much of the data each part reads (:class:`~judge_reward.scoreboard.ScoreboardSettings`).
        min_agreement: the reward's summary-level Spearman with every aspect must reach this.
        max_win_rate: no attack family may win more often.
        min_damage: every damage family must be scored below the original at least this often.
        out_dir: where scoreboard.json / .md / .png go (main process only).
    """

    def __init__(self, reward, dataset, references=None, settings: ScoreboardSettings = ScoreboardSettings(),
                 min_agreement: Optional[float] = None, max_win_rate: Optional[float] = 0.1,
                 min_damage: Optional[float] = None, stop_on_fail: bool = True, out_dir: str | Path | None = None,
                 log_wandb: bool = True, config_name: str = ""):
        self.reward = _reward_of(reward)
        self.dataset = dataset
        self.references = references
        self.settings = settings
        self.gates = {"min_agreement": min_agreement, "max_win_rate": max_win_rate, "min_damage": min_damage}
        for name, value in self.gates.items():
            low = -1.0 if name == "min_agreement" else 0.0
            if value is not None and not low <= value <= 1:
                raise ValueError(f"{name}: expected a number in [{low:g}, 1], got {value!r}")
        self.stop_on_fail = stop_on_fail
        self.out_dir = out_dir
        self.log_wandb = log_wandb
        self.config_name = config_name
        self.board: Scoreboard | None = None

    def run(self, main_process: bool = True) -> Scoreboard:
        """Run the scoreboard now (what ``on_train_begin`` does) and return it."""
        board = validate(self.reward, self.dataset, self.settings, self.config_name, self.references,
                         progress=main_process)
        self.board = board
        if main_process:
            log.warning("%s", board.to_markdown())
            if self.out_dir is not None:
                write([board], self.out_dir)
            if self.log_wandb:
                try:
                    import wandb
                except ImportError:
                    wandb = None
                if wandb is not None and wandb.run is not None:
                    wandb.run.log(flat(board))
        return board

    def on_train_begin(self, args, state, control, **kwargs):
        # every process runs it (deterministic), so all of them stop together
        board = self.run(main_process=state.is_world_process_zero)
        failed = board.failures(**self.gates)
        if failed and self.stop_on_fail:
            raise ScoreboardGateError(failed, board)
        if failed and state.is_world_process_zero:
            log.warning("reward scoreboard: %s (stop_on_fail=False: training anyway)", "; ".join(failed))
