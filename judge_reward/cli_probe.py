"""``judge-reward probe``: reward-hacking probes for a judge config, as a gate before training.

Register in the typer app with ``app.command("probe")(probe_command)``. Exit codes: 0 when every
family's attack win rate is at most ``--max-win-rate``, 1 when some family's is above it (named on
stderr), 2 for bad input (checked before the judge model is loaded). A family's fair wordings (a
shorter answer kept whole; the source's lead, for a summary) are reported and not gated. See docs/probes.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .cli_errors import check_output_folder, fail, user_errors


@user_errors
def probe_command(
    config: str = typer.Option("default", "--config", "-c",
                               help="judge YAML (path or built-in name); its reward: section is the reward"),
    data: Path = typer.Option(..., "--data", help="PAIRS.jsonl: one {source, output, reference?, id?} per line (real outputs)"),
    out: Path = typer.Option(Path("reports/probes"), "--out", "-o", help="folder for probes.json, probes.md and probes.png"),
    max_win_rate: float = typer.Option(0.1, "--max-win-rate", help="exit 1 when a family's win rate is above this"),
    families: Optional[str] = typer.Option(None, "--families", help="comma-separated families (default: all)"),
    limit: Optional[int] = typer.Option(None, "--limit", help="probe only the first N pairs"),
    wandb: bool = typer.Option(False, "--wandb/--no-wandb", help="log the tables, scalars and figure to W&B"),
    task: Optional[str] = typer.Option(None, "--task", help="what the outputs are for (summarization, dialogue, ...): "
                                       "decides which wordings are fair outputs, reported and not gated "
                                       "(default: the task of the reward's aspects)"),
    n_boot: int = typer.Option(1000, "--n-boot", help="bootstrap resamples for the CIs (0: none)"),
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap"),
):
    """Score manipulated versions of real outputs with the trainer's reward; gate on the win rate."""
    from .aspects import TASKS, ConfigError
    from .metaeval.datasets import DatasetError
    from .probes import FAMILIES, load_pairs, run_probes

    chosen = [f.strip() for f in families.split(",") if f.strip()] if families is not None else list(FAMILIES)
    unknown = [f for f in chosen if f not in FAMILIES]
    if unknown or not chosen:
        fail(f"--families: unknown family {unknown[0]!r}; known: {', '.join(FAMILIES)}" if unknown
              else f"--families: give at least one of {', '.join(FAMILIES)}")
    if not 0 <= max_win_rate <= 1:
        fail(f"--max-win-rate: expected a number in [0, 1], got {max_win_rate!r}")
    if limit is not None and limit < 1:
        fail(f"--limit: expected a whole number >= 1, got {limit!r}")
    if task is not None and task not in TASKS:
        fail(f"--task: expected one of {', '.join(TASKS)}, got {task!r}")
    if n_boot < 0:
        fail(f"--n-boot: expected a whole number >= 0, got {n_boot!r}")
    check_output_folder(out, "--out", "probes.json, probes.md and probes.png")
    try:
        every_pair = load_pairs(data)  # every line is checked before the model loads
        pairs = every_pair[:limit]
    except DatasetError as err:
        fail(str(err))
    try:
        from .reward import Reward

        reward = Reward.from_config(config).use_inputs([p.source for p in every_pair])
    except ConfigError as err:
        fail(str(err))
    report = run_probes(reward, pairs, chosen, n_boot=n_boot, seed=seed, task=task)
    report.meta["config"] = config
    report.meta["data"] = str(data)
    paths = report.write(out, max_win_rate)
    typer.echo(report.to_markdown(max_win_rate, variants=False))
    for path in paths.values():
        typer.echo(f"wrote {path}", err=True)
    if wandb:
        report.log_wandb(figure=paths.get("figure"))
        typer.echo("logged to W&B", err=True)
    unmeasured = report.unmeasured()
    if unmeasured:
        typer.echo(f"FAIL: {unmeasured}", err=True)
        raise typer.Exit(1)
    failed = report.failed(max_win_rate)
    if failed:
        rates = ", ".join(f"{f} {report.families[f].win_rate:.2f}" for f in failed)
        typer.echo(f"FAIL: win rate above {max_win_rate:g} for {len(failed)} famil{'y' if len(failed) == 1 else 'ies'}: {rates}",
                   err=True)
        raise typer.Exit(1)
    typer.echo(f"ok: every family's win rate is at most {max_win_rate:g}", err=True)
