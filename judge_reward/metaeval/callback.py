"""A ``transformers.TrainerCallback`` that tracks how well a judge agrees with humans during training.

Every ``every_n_steps`` optimizer steps it scores a fixed human-rated probe set (e.g. the 64
SummEval summaries of 4 documents) with the judge and logs, through ``Trainer.log`` (so W&B,
TensorBoard and ``state.log_history`` all see it)::

    metaeval/<aspect>/<method>            # at the primary level (default: sample level)
    metaeval/<aspect>/<level>/<method>    # at any further level
    metaeval/<aspect>/dropped             # failed judgments on the probe set

Use it when the judge itself changes during training (a judge being fine-tuned, or a reward
model sharing weights with the policy), or simply to watch for reward hacking of a fixed judge.

    cb = CorrelationCallback(judge, probe, CorrelationCallbackConfig(every_n_steps=50))
    trainer = Trainer(..., callbacks=[cb])
    cb.attach(trainer)   # the callback logs through trainer.log
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal, Optional

from pydantic import Field
from transformers import TrainerCallback

from ..config import Expect, PositiveInt, Section
from .correlation import LEVELS, METHODS
from .datasets import MetaEvalDataset
from .judging import judge_scores
from .report import MetaEvalConfig, MetaEvalReport, evaluate


@dataclass(frozen=True)
class CorrelationCallbackConfig(Section):
    """When and what :class:`CorrelationCallback` measures.

    Attributes:
        every_n_steps: score the probe set every this many global steps.
        at_train_begin: also measure before the first step (the baseline to compare against).
        aspects: aspects to score (default: all aspects of the probe set).
        methods: correlations to log.
        levels: levels to log; the first one is logged without a level in its key.
        prefix: first part of every logged key.
        chunk_size: items per ``judge.score`` call.
    """

    section_path: ClassVar[str] = "CorrelationCallbackConfig"

    every_n_steps: PositiveInt = 100
    at_train_begin: bool = True
    aspects: Optional[tuple[str, ...]] = None
    methods: tuple[Literal[METHODS], ...] = ("spearman", "kendall", "pearson")
    levels: Annotated[tuple[Literal[LEVELS], ...], Field(min_length=1), Expect("a non-empty list of levels")] = ("sample", "dataset")
    prefix: str = "metaeval"
    chunk_size: PositiveInt = 64


class CorrelationCallback(TrainerCallback):
    """Log the judge-human correlation on a fixed probe set every N steps (see module docstring)."""

    def __init__(self, judge, probe: MetaEvalDataset, config: CorrelationCallbackConfig = CorrelationCallbackConfig()):
        if not hasattr(judge, "score"):
            raise TypeError(f"judge: expected an object with .score(items, aspects=...), got {type(judge).__name__}")
        if len(probe) < 2:
            raise ValueError(f"probe: needs at least 2 items, got {len(probe)}")
        self.judge = judge
        self.probe = probe
        self.config = config
        self.aspects = list(config.aspects or probe.aspects)
        for a in self.aspects:
            probe.human(a)  # fail now, not at step N, if the probe has no human scores for it
        # bootstrap and pairwise tests are too slow to run inside a training loop and pointless
        # on one judge; the point estimates are what the curve shows
        self.eval_config = MetaEvalConfig(
            levels=config.levels, methods=config.methods, n_bootstrap=0, compare=False
        )
        self.trainer = None
        self.history: list[tuple[int, dict[str, float]]] = []
        self.last_report: MetaEvalReport | None = None

    def attach(self, trainer) -> "CorrelationCallback":
        """Bind to ``trainer`` (needed to log through ``trainer.log``); adds itself if not present."""
        self.trainer = trainer
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        return self

    def measure(self) -> dict[str, float]:
        """Score the probe set now and return the metrics as they would be logged."""
        judged = judge_scores(self.judge, self.probe.items, self.aspects, self.config.chunk_size)
        report = evaluate(
            {"judge": judged.scores},
            {a: self.probe.human(a) for a in self.aspects},
            self.probe.groups,
            self.probe.systems,
            self.eval_config,
            dataset=self.probe.name,
        )
        self.last_report = report
        p = self.config.prefix
        primary = self.config.levels[0]
        logs: dict[str, float] = {}
        for result in report.results:
            for cell in result.cells:
                level = "" if cell.level == primary else f"{cell.level}/"
                # NaN (e.g. a judge that gives every probe item the same score) is logged as is:
                # a flat line at "undefined" is information, a silent 0 would be a lie
                logs[f"{p}/{result.aspect}/{level}{cell.method}"] = cell.value
            logs[f"{p}/{result.aspect}/dropped"] = float(result.dropped)
        return logs

    def _require_trainer(self) -> None:
        if self.trainer is None:
            raise RuntimeError(
                "CorrelationCallback is not attached to a trainer: call callback.attach(trainer) after "
                "building the Trainer, so the correlations can be logged through trainer.log"
            )

    def _log(self, state) -> None:
        self._require_trainer()
        logs = self.measure()
        self.history.append((state.global_step, logs))
        from transformers import Trainer

        # The base-class log (log_history and every integration's on_log, W&B included), not an
        # override such as GRPOTrainer.log / RLOOTrainer.log, which would flush the trainer's own
        # per-step buffers (reward, rewards/*, judge/*, completions) into this row and out of its own.
        log = Trainer.log.__get__(self.trainer) if isinstance(self.trainer, Trainer) else self.trainer.log
        log(dict(logs))

    def on_train_begin(self, args, state, control, **kwargs):
        self._require_trainer()  # fail before training, not at step N
        if self.config.at_train_begin and state.is_world_process_zero:
            self._log(state)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.config.every_n_steps == 0 and state.is_world_process_zero:
            # trainer.log clears control.should_log; keep the trainer's own decision for this step,
            # or its loss/grad_norm row would be dropped whenever the probe fires.
            should_log = control.should_log
            self._log(state)
            control.should_log = should_log
            self.trainer.control.should_log = should_log
