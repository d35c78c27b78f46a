"""``judge-reward train``: a small, real RL job from one YAML file (built-ins in ``judge_reward/configs/train/``).

::

    trainer: grpo                        # grpo | rloo | online_dpo
    judge: default                       # judge YAML (path or built-in name), or an inline mapping
    reward: {aspects: [coherence], normalise: unit}       # JudgeRewardConfig
    per_aspect: false                    # one reward function per aspect (then weigh with training.reward_weights)
    data: {summeval: summeval/summeval.json, num_prompts: 4, max_source_words: 120}   # under the data folder
    policy: {model: tiny}                # PolicyConfig
    training: {max_steps: 4, num_generations: 4, ...}     # GRPOConfig / RLOOConfig / OnlineDPOConfig fields
    wandb: {mode: offline, project: judge-reward}
    probe: {summeval: ..., docs: 4, every_n_steps: 2}     # optional CorrelationCallback

Every section is validated up front and a bad field is reported by its path and value. Data paths
resolve as :func:`judge_reward.data.resolve_data_path` does: a path that exists, else a relative one
under ``$JUDGE_REWARD_DATA`` or ``../shared/data``.
"""

from __future__ import annotations

import json
import os
import random
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal, Optional

from judge_reward.config import (
    ConfigError,
    PositiveInt,
    Section,
    Text,
    build_section,
    read_yaml,
    resolve_config_path,
)
from judge_reward.data import DataNotFoundError, read_data_text, read_json_list, resolve_data_path

from .policy import PolicyConfig
from .reward import JudgeRewardConfig

TRAINERS = ("grpo", "rloo", "online_dpo")
WANDB_MODES = ("offline", "online", "disabled")
DEFAULT_TEMPLATE = "Summarize the following news article in one or two sentences.\n\nArticle: {source}\n\nSummary:"


def _data_path(value: str, field: str) -> str:
    """``value`` resolved as :func:`~judge_reward.data.resolve_data_path` does; a ConfigError naming ``field``."""
    try:
        return str(resolve_data_path(value, what=field))
    except DataNotFoundError as err:
        raise ConfigError(err.problem.split(": ", 1)[-1], field=field) from None


@dataclass
class DataConfig(Section):
    """Prompts: SummEval articles, or a JSONL file with ``prompt`` (and ``source``/``reference``) rows."""

    section_path: ClassVar[str] = "data"

    summeval: Optional[Text] = None
    """Path to ``summeval.json`` (``summeval/summeval.json`` finds it in the data folder); one prompt
    per distinct article, in file order."""
    jsonl: Optional[Text] = None
    """Path to a JSONL file of ``{prompt, source?, reference?}`` rows (instead of ``summeval``)."""
    num_prompts: PositiveInt = 8
    max_source_words: Optional[PositiveInt] = 150
    """Cut each article to this many words (keeps the tiny CPU run short); ``null`` keeps it whole."""
    prompt_template: str = DEFAULT_TEMPLATE
    """SummEval only: how an article becomes a prompt (``{source}`` is replaced)."""
    conversational: bool = False
    """Give the prompt as a chat user message (the policy's chat template applies)."""

    def check(self) -> None:
        if (self.summeval is None) == (self.jsonl is None):
            raise ConfigError("give exactly one of summeval (path) or jsonl (path)")
        key = "summeval" if self.summeval is not None else "jsonl"
        setattr(self, key, _data_path(getattr(self, key), key))
        if "{source}" not in self.prompt_template:
            raise ConfigError(f"must contain '{{source}}', got {self.prompt_template!r}", field="prompt_template")


@dataclass
class ProbeConfig(Section):
    """A human-rated probe set for :class:`~judge_reward.trainers.callbacks.CorrelationCallback`."""

    section_path: ClassVar[str] = "probe"

    summeval: Text
    """Path to ``summeval.json``, resolved as ``data.summeval`` is."""
    docs: PositiveInt = 4
    """First N SummEval documents (16 rated summaries each)."""
    every_n_steps: PositiveInt = 2
    aspects: Optional[list[str]] = None
    at_train_begin: bool = True

    def check(self) -> None:
        self.summeval = _data_path(self.summeval, "summeval")


@dataclass
class RunWandbConfig(Section):
    """The ``wandb:`` section of a training run."""

    section_path: ClassVar[str] = "wandb"

    mode: Literal[WANDB_MODES] = "offline"
    """``offline`` (files under ``output_dir``), ``online`` or ``disabled``."""
    project: str = "judge-reward"
    name: Optional[str] = None


@dataclass
class TrainRunConfig(Section):
    """One training run (see the module docstring for the YAML form)."""

    data: DataConfig
    trainer: Literal[TRAINERS] = "grpo"
    judge: Any = "default"
    reward: JudgeRewardConfig = field(default_factory=JudgeRewardConfig)
    per_aspect: bool = False
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    training: dict = field(default_factory=dict)
    """GRPOConfig / RLOOConfig / OnlineDPOConfig fields (checked when the trainer is built)."""
    wandb: RunWandbConfig = field(default_factory=RunWandbConfig)
    probe: Optional[ProbeConfig] = None
    reward_fields: Optional[dict] = None
    """The ``reward:`` keys the YAML set. A run built from YAML is rewarded with the judge config's own
    ``reward:`` section (guards included) with these on top, so a run config changes what it names
    and inherits the rest; ``None`` (a config built in code): ``reward`` as it is."""

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides) -> "TrainRunConfig":
        path = resolve_config_path(path, "train")
        raw = read_yaml(path)
        return cls.from_dict({} if raw is None else raw, str(path), **overrides)

    @classmethod
    def from_dict(cls, raw: dict, where: str = "config", **overrides) -> "TrainRunConfig":
        """A run from its YAML mapping; ``where`` (the file) starts every error message; ``overrides``
        (``max_steps=...``, None ignored) go into ``training``."""
        if not isinstance(raw, dict):
            raise ConfigError(f"expected a mapping at the top level, got {type(raw).__name__}", file=where)
        raw = dict(raw)
        training = raw.get("training")
        if training is None or isinstance(training, dict):  # anything else is refused by the field's type
            raw["training"] = {**(training or {}), **{k: v for k, v in overrides.items() if v is not None}}
        if not raw.get("probe"):
            raw["probe"] = None
        raw["reward_fields"] = dict(raw["reward"]) if isinstance(raw.get("reward"), dict) else {}
        return build_section(cls, raw, "", file=where)

    def reward_config(self, judge_config) -> JudgeRewardConfig:
        """What the run is rewarded with (see :attr:`reward_fields`), given the judge's config."""
        if self.reward_fields is None:
            return self.reward
        return JudgeRewardConfig.from_judge_config(judge_config, **self.reward_fields)


def _read_data_text(path: Path, field: str) -> str:
    return read_data_text(path, lambda message: ConfigError(f"{field}: {message}"))


def _read_records(path: Path) -> list:
    """SummEval's JSON list of records, with every mistake a ConfigError naming ``data.summeval`` and the file."""
    return read_json_list(path, lambda message: ConfigError(f"data.summeval: {message}"))


def load_prompts(data: DataConfig) -> list[dict]:
    """Dataset rows ``{prompt, source, reference}`` for the configured prompts."""
    rows = []
    if data.summeval:
        records = _read_records(Path(data.summeval))
        seen = set()
        for k, rec in enumerate(records):
            if not isinstance(rec, dict):
                raise ConfigError(f"data.summeval: {data.summeval}: record {k}: expected an object, got {rec!r:.60}")
            if rec.get("doc_id") in seen:
                continue
            for key in ("doc_id", "source"):
                if not isinstance(rec.get(key), str):
                    raise ConfigError(f"data.summeval: {data.summeval}: record {k}.{key}: expected text, got {rec.get(key)!r:.60}")
            seen.add(rec["doc_id"])
            words = rec["source"].split()
            source = " ".join(words[: data.max_source_words] if data.max_source_words else words)
            rows.append({"prompt": data.prompt_template.format(source=source), "source": source,
                         "reference": rec.get("reference")})
            if len(rows) == data.num_prompts:
                break
    else:
        for n, line in enumerate(_read_data_text(Path(data.jsonl), "data.jsonl").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(f"data.jsonl: {data.jsonl}:{n}: not valid JSON ({err.msg})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("prompt"), str):
                raise ConfigError(f"data.jsonl: {data.jsonl}:{n}: field 'prompt' (text) is required")
            rows.append({"prompt": rec["prompt"], "source": rec.get("source") or rec["prompt"],
                         "reference": rec.get("reference")})
            if len(rows) == data.num_prompts:
                break
    if not rows:
        raise ConfigError("data: no prompts were read")
    if data.conversational:
        for r in rows:
            r["prompt"] = [{"role": "user", "content": r["prompt"]}]
    if all(r["reference"] is None for r in rows):
        for r in rows:
            del r["reference"]
    return rows


def _trainer_args(cls, training: dict, output_dir: str, report_wandb: bool):
    import torch

    args = {"output_dir": output_dir, "logging_steps": 1, "save_strategy": "no",
            "report_to": ["wandb"] if report_wandb else [], "disable_tqdm": False}
    if not torch.cuda.is_available():
        args.update(use_cpu=True, bf16=False)
    args.update(training)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(args) - known)
    if unknown:
        raise ConfigError(f"training: unknown field(s) {unknown} for {cls.__name__}")
    try:
        return cls(**args)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"training: {err}") from None


def build_trainer(config: TrainRunConfig, judge=None, output_dir: str | None = None, callbacks=()):
    """(trainer, reward functions, probe callback) for a run config; ``judge`` overrides ``config.judge``."""
    from datasets import Dataset

    from judge_reward import Judge
    from judge_reward.judge import JudgeConfig

    from .policy import load_policy
    from .reward import JudgeReward

    # Everything a mistake can be found in is read before the judge and the policy load.
    rows = load_prompts(config.data)
    if judge is None:
        judge_config = JudgeConfig.load(config.judge)
        from ..reward import check_reward
        check_reward(judge_config, reward=config.reward_config(judge_config).reward_config())
    output_dir = output_dir or config.training.get("output_dir") or f"reports/train/{config.trainer}"
    training = {k: v for k, v in config.training.items() if k != "output_dir"}
    if config.trainer == "grpo":
        from trl import GRPOConfig as args_class, GRPOTrainer as trainer_class
    elif config.trainer == "rloo":
        from trl import RLOOConfig as args_class, RLOOTrainer as trainer_class
    else:
        from .online_dpo import JudgeOnlineDPOTrainer as trainer_class, OnlineDPOConfig as args_class
    args = _trainer_args(args_class, training, output_dir, config.wandb.mode != "disabled")
    if judge is None:
        judge = Judge(judge_config)
    reward_config = config.reward_config(judge.config)
    if config.per_aspect:
        rewards = JudgeReward.per_aspect(judge, reward_config)
    else:
        rewards = [JudgeReward(judge, reward_config)]
    for reward in rewards:  # the task's data, for a guard that reads what other inputs give (data_values.domain)
        reward.use_inputs([r["source"] for r in rows if r.get("source")])
    weights = getattr(args, "reward_weights", None)
    if weights is not None and len(weights) != len(rewards):
        raise ConfigError(f"training.reward_weights: {len(weights)} weights for {len(rewards)} reward functions "
                          f"({', '.join(r.__name__ for r in rewards)})")
    texts = [r["source"] for r in rows] + [config.data.prompt_template]
    model, tokenizer = load_policy(config.policy, texts)
    trainer = trainer_class(model=model, reward_funcs=rewards, args=args, train_dataset=Dataset.from_list(rows),
                            processing_class=tokenizer, callbacks=list(callbacks))
    probe_cb = None
    if config.probe is not None:
        from judge_reward.metaeval.datasets import load_summeval

        from .callbacks import CorrelationCallback, CorrelationCallbackConfig

        probe = load_summeval(config.probe.summeval).first_groups(config.probe.docs)
        cb_config = CorrelationCallbackConfig(
            every_n_steps=config.probe.every_n_steps, at_train_begin=config.probe.at_train_begin,
            aspects=tuple(config.probe.aspects) if config.probe.aspects else None,
        )
        probe_cb = CorrelationCallback(judge, probe, cb_config).attach(trainer)
    return trainer, rewards, probe_cb


def _one_line(entry, limit: int) -> str:
    """A prompt or completion (text, or chat messages: the last one's content) on one line, cut to ``limit``."""
    if isinstance(entry, list) and entry and isinstance(entry[-1], dict):
        entry = entry[-1].get("content", "")
    text = " ".join(str(entry).split())
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text.split())} words)"


def print_completion_samples(prompts, completions, rewards, advantages, step, num_samples=None, extra=None):
    """Sampled completions of a logging step, a few lines each: the prompt's start, the completion,
    and the rewards, advantage and judge columns on one line. Same arguments as TRL's
    ``print_prompt_completions_sample``, whose table squeezed the prompt (the whole article) into a
    column a few characters wide, one word per line, beside the judge's columns."""
    extra = extra or {}
    indices = list(range(len(prompts)))
    if num_samples is not None:
        if num_samples <= 0:
            return
        if num_samples < len(indices):
            indices = random.sample(indices, num_samples)
    lines = [f"step {step}: {len(indices)} of {len(prompts)} completions"]
    for n, i in enumerate(indices, 1):
        numbers = [f"{name} {values[i]:.4g}" for name, values in rewards.items()]
        if advantages is not None:
            numbers.append(f"advantage {advantages[i]:.3g}")
        numbers += [f"{name} {values[i]:.4g}" if isinstance(values[i], float) else f"{name} {values[i]}"
                    for name, values in extra.items()]
        lines += [f"  [{n}] prompt:     {_one_line(prompts[i], 120)}",
                  f"      completion: {_one_line(completions[i], 240)}",
                  f"      {' | '.join(numbers)}"]
    print("\n".join(lines), flush=True)


@contextmanager
def readable_completion_samples():
    """While a GRPO or RLOO run trains, ``log_completions`` prints with :func:`print_completion_samples`,
    once per step (the completions still go to ``output_dir/completions/*.parquet`` and W&B as TRL
    writes them)."""
    from trl.trainer import grpo_trainer, rloo_trainer

    printed: set = set()

    def once_per_step(prompts, completions, rewards, advantages, step, *args, **kwargs):
        # TRL's closing log() (the train summary) logs the last step's completions again
        if step not in printed:
            printed.add(step)
            print_completion_samples(prompts, completions, rewards, advantages, step, *args, **kwargs)

    modules = [m for m in (grpo_trainer, rloo_trainer) if hasattr(m, "print_prompt_completions_sample")]
    saved = [m.print_prompt_completions_sample for m in modules]
    for m in modules:
        m.print_prompt_completions_sample = once_per_step
    try:
        yield
    finally:
        for m, original in zip(modules, saved):
            m.print_prompt_completions_sample = original


def run_training(config: TrainRunConfig, output_dir: str | None = None, judge=None) -> dict:
    """Train, then return a summary: runtime, final logged metrics, judge stats, W&B check."""
    mode = config.wandb.mode
    output_dir = output_dir or config.training.get("output_dir") or f"reports/train/{config.trainer}"
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    if mode != "disabled":
        os.environ["WANDB_MODE"] = mode
        os.environ.setdefault("WANDB_DIR", str(Path(output_dir).resolve()))
        os.environ.setdefault("WANDB_PROJECT", config.wandb.project)
        if config.wandb.name:
            os.environ["WANDB_NAME"] = config.wandb.name
    start = time.perf_counter()
    trainer, rewards, _ = build_trainer(config, judge=judge, output_dir=output_dir)
    built = time.perf_counter()
    with readable_completion_samples():
        trainer.train()
    trained = time.perf_counter()
    summary: dict[str, Any] = {
        "trainer": config.trainer,
        "output_dir": output_dir,
        "seconds_setup": built - start,
        "seconds_train": trained - built,
        "steps": trainer.state.global_step,
        "log_history": trainer.state.log_history,
        "rewards": [r.stats() for r in rewards],
    }
    if mode == "offline":
        import wandb

        if wandb.run is not None:
            from transformers.integrations import rewrite_logs

            run_dir = Path(wandb.run.dir).parent
            wandb.finish()
            # what the trainer logged, under the names its W&B callback gives them (train/judge/...)
            history = trainer.state.log_history
            keys = sorted({k for row in history for k in rewrite_logs(row) if k.startswith("train/judge/")})
            summary["wandb"] = {"run_dir": str(run_dir), "rows": len(history), "judge_keys": keys}
    (Path(output_dir) / "train_summary.json").write_text(json.dumps(
        {**summary, "config": asdict(config)}, indent=2, default=str))
    return summary
