"""``judge-reward train`` and ``judge-reward label-pairs`` (registered in judge_reward/console.py).

Heavy imports (torch, TRL) happen inside the commands so ``judge-reward --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from judge_reward.cli_errors import UserError, read_json_lines, read_text_lines, user_errors

console = Console(stderr=True)


@user_errors
def train_command(
    trainer: str = typer.Argument(..., help="grpo, rloo or online-dpo"),
    config: str = typer.Option(..., "--config", "-c", help="training YAML (path or built-in name in judge_reward/configs/train)"),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="override training.max_steps"),
    output_dir: Optional[str] = typer.Option(None, "--output-dir", help="override training.output_dir"),
):
    """Train a policy with the judge as its reward (a small real TRL job; W&B offline by default)."""
    from .run import TRAINERS, TrainRunConfig, run_training

    name = trainer.replace("-", "_")
    if name not in TRAINERS:
        raise UserError(f"trainer: unknown value {trainer!r}; choose one of {', '.join(t.replace('_', '-') for t in TRAINERS)}")
    cfg = TrainRunConfig.from_yaml(config, max_steps=max_steps)
    if cfg.trainer != name:  # training arguments differ per trainer, so a mismatch is a mistake
        raise UserError(f"trainer: the command says {trainer!r} but {config} sets trainer: {cfg.trainer}")
    summary = run_training(cfg, output_dir=output_dir)
    table = Table(title=f"judge-reward train {trainer}: {summary['steps']} steps")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("setup seconds (judge, policy, trainer)", f"{summary['seconds_setup']:.1f}")
    table.add_row("train seconds", f"{summary['seconds_train']:.1f}")
    train_rows = [r for r in summary["log_history"] if "loss" in r or any(k.startswith("rewards/") for k in r)]
    for key in ("reward", "objective/scores"):
        values = [r[key] for r in train_rows if r.get(key) is not None]
        if values:
            table.add_row(f"{key} first -> last step", f"{values[0]:.4f} -> {values[-1]:.4f}")
    for stats in summary["rewards"]:
        table.add_row(f"{stats['name']}: judge calls / seconds", f"{stats['calls']} / {stats['seconds']:.1f}")
        table.add_row(f"{stats['name']}: failed rewards", str(sum(stats["failures"].values())))
    if "wandb" in summary:
        table.add_row("W&B rows / judge keys", f"{summary['wandb']['rows']} / {len(summary['wandb']['judge_keys'])}")
        table.add_row("W&B run", summary["wandb"]["run_dir"])
    table.add_row("summary", str(Path(summary["output_dir"]) / "train_summary.json"))
    console.print(table)


def _read_rows(path: Path) -> list[dict]:
    if path.suffix == ".json":
        try:
            rows = json.loads("".join(line for _, line in read_text_lines(path)))
        except json.JSONDecodeError as err:
            raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(rows, list):
            raise UserError(f"{path}: expected a JSON list of rows, got {type(rows).__name__}")
    else:
        rows = [row for _, row in read_json_lines(path)]
    if not rows:
        raise UserError(f"no rows in {path}")
    return rows


@user_errors
def label_pairs_command(
    input: Path = typer.Argument(..., help="JSONL (or .json list) of rows: prompt, completions (k candidates), source?, reference?"),
    out: Path = typer.Option(..., "--out", "-o", help="where to write the DPO dataset: a .jsonl file or a directory (save_to_disk)"),
    config: str = typer.Option("default", "--config", "-c", help="judge YAML (path or built-in name)"),
    mode: str = typer.Option("pointwise", help="pointwise (score each candidate) or pairwise (judge two at a time)"),
    pairs: str = typer.Option("best_worst", help="best_worst (one pair per row) or all"),
    min_margin: float = typer.Option(0.0, "--min-margin", help="smallest reward (pointwise) or preference (pairwise) gap"),
    swap: bool = typer.Option(True, "--swap/--no-swap", help="pairwise: judge both orders (position debiasing)"),
    require_agreement: bool = typer.Option(True, "--require-agreement/--allow-disagreement", help="pairwise: drop pairs whose two orders disagree"),
    aspects: Optional[str] = typer.Option(None, help="comma-separated aspects (pointwise; default: the judge config's reward section)"),
    normalise: Optional[str] = typer.Option(
        None, help="pointwise reward scale: none, unit or scale (default: the judge config's reward section)"),
    prompt_column: str = typer.Option("prompt", "--prompt-column"),
    completions_column: str = typer.Option("completions", "--completions-column"),
    source_column: str = typer.Option("source", "--source-column"),
    human_column: Optional[str] = typer.Option(None, "--human-column", help="per-candidate human scores; reports agreement"),
    generate_model: Optional[Path] = typer.Option(None, "--generate-model", help="sample the candidates from this local model instead"),
    num_candidates: int = typer.Option(4, "--num-candidates", help="with --generate-model: candidates per prompt"),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens"),
    limit: Optional[int] = typer.Option(None, help="label only the first N rows"),
):
    """Label DPO preference pairs with the judge: chosen/rejected by judge score, with a margin."""
    from judge_reward import Judge
    from judge_reward.judge import JudgeConfig

    from .pairs import PairLabelConfig, check_prompt_formats, check_rows, generate_candidates, label_pairs
    from .reward import JudgeRewardConfig

    if limit is not None and limit < 1:
        raise UserError(f"--limit: expected a whole number >= 1, got {limit}")
    if generate_model is not None:
        if num_candidates < 2:
            raise UserError(f"--num-candidates: a pair needs at least 2 candidates per prompt, got {num_candidates}")
        if not (generate_model / "config.json").is_file():
            raise UserError(f"--generate-model {generate_model}: not a local model directory with config.json")
    rows = _read_rows(input)[:limit]
    judge_config = JudgeConfig.from_yaml(config)
    # pointwise: the judge config's reward (guards included), what a trainer built from it gets
    reward = JudgeRewardConfig.from_judge_config(
        judge_config, aspects=[a.strip() for a in aspects.split(",")] if aspects else None,
        normalise=normalise, source_column=source_column)
    cfg = PairLabelConfig(
        prompt_column=prompt_column, completions_column=completions_column, source_column=source_column,
        human_column=human_column, mode=mode, pairs=pairs, min_margin=min_margin, swap=swap,
        require_agreement=require_agreement, reward=reward,
    )
    try:  # every row, before the model loads (with --generate-model only the prompts exist yet)
        if generate_model is None:
            check_rows(cfg, rows)
        else:
            for k, row in enumerate(rows):
                if not isinstance(row, dict) or prompt_column not in row:
                    raise ValueError(f"rows[{k}].{prompt_column}: required column is missing")
            check_prompt_formats(cfg, [row[prompt_column] for row in rows])
    except (TypeError, ValueError) as err:
        raise UserError(f"{input}: {err}") from None
    if mode == "pointwise":
        from ..reward import check_reward
        check_reward(judge_config, reward=reward.reward_config())
    judge = Judge.from_config(judge_config)
    if generate_model is not None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(generate_model), local_files_only=True)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        model = AutoModelForCausalLM.from_pretrained(str(generate_model), local_files_only=True)
        generated = generate_candidates(model, tok, [r[prompt_column] for r in rows], n=num_candidates,
                                        max_new_tokens=max_new_tokens)
        for row, cands in zip(rows, generated):
            row[completions_column] = cands
    try:
        data, labeler = label_pairs(judge, rows, cfg)
        summary = labeler.summary()
    except ValueError as err:
        raise UserError(str(err)) from None
    if out.suffix == ".jsonl":
        out.parent.mkdir(parents=True, exist_ok=True)
        data.to_json(str(out), lines=True)
    else:
        data.save_to_disk(str(out))
    table = Table(title=f"judge-reward label-pairs ({mode}): {len(data)} pairs from {len(rows)} rows")
    table.add_column("what")
    table.add_column("value", justify="right")
    for key, value in sorted(summary.items()):
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    table.add_row("written", str(out))
    console.print(table)
