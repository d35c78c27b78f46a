"""``judge-reward audit``: the self-preference audit from the command line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from judge_reward.cli_errors import UserError, check_output_folder, user_errors

console = Console(stderr=True)
CACHE_FILE = "judgments.sqlite"


@user_errors
def audit_command(
    config: str = typer.Option(
        "gptscore", "--config", "-c",
        help="audit YAML (path, or built-in name in judge_reward/configs/audit: gptscore, geval); a judge YAML also works",
    ),
    out: Path = typer.Option(..., "--out", "-o", help="folder for audit.json, summary.md and figure.png"),
    judge: Optional[str] = typer.Option(None, help="override the judge config (name or path)"),
    data: Optional[Path] = typer.Option(None, help="zhang2023 data folder"),
    aspects: Optional[str] = typer.Option(None, help="comma-separated aspects (default: the judge config's)"),
    max_articles: Optional[int] = typer.Option(None, "--max-articles", help="audit only the first N articles"),
    n_resamples: Optional[int] = typer.Option(None, "--n-resamples", help="bootstrap resamples"),
    device: Optional[str] = typer.Option(None, help="override the judge backend's device (cpu, cuda, auto)"),
    cache: Optional[Path] = typer.Option(
        None, help="sqlite file keeping the judge's scores across runs (default: OUT/judgments.sqlite, so an "
        "interrupted run resumes)"
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="score everything afresh and keep no sqlite cache"),
    wandb: Optional[bool] = typer.Option(None, "--wandb/--no-wandb", help="log the report to W&B (default: the config's)"),
    wandb_project: Optional[str] = typer.Option(None, "--wandb-project"),
):
    """Does the judge prefer LLM-written summaries where people did not? (G-Eval paper, Section 4.)"""
    from judge_reward import Judge

    from .audit import AuditConfig, NothingToAnalyse, judge_config, run_audit
    from .data import load_zhang2023

    try:
        cfg = AuditConfig.from_yaml(config)
        if judge:
            cfg.judge = judge
        if data:
            cfg.data = str(data)
        if aspects:
            cfg.aspects = [a.strip() for a in aspects.split(",") if a.strip()]
        if cache and no_cache:
            raise UserError(f"--cache {cache} and --no-cache: give one of them")
        if cache:
            cfg.cache = str(cache)
        elif cfg.cache is None and not no_cache:
            cfg.cache = str(out / CACHE_FILE)
        if no_cache:
            cfg.cache = None
        if max_articles is not None:
            cfg.max_articles = max_articles
        if n_resamples is not None:
            cfg.stats = {**cfg.stats, "n_resamples": n_resamples}
        if wandb is not None:
            cfg.wandb = {**cfg.wandb, "enabled": wandb}
        if wandb_project:
            cfg.wandb = {**cfg.wandb, "project": wandb_project}
        cfg.__post_init__()  # re-validate after the overrides
        check_output_folder(out, "--out", "audit.json, summary.md and figure.png")
        if cfg.cache and Path(cfg.cache).is_dir():
            raise UserError(f"cache {cfg.cache}: is a folder, not a sqlite file")
        judge_cfg = judge_config(cfg, {"device": device})  # a bad judge config fails here, before a model loads
        if no_cache:  # also the judge config's own cache.path: --no-cache keeps no sqlite file at all
            judge_cfg.cache = {**(judge_cfg.cache or {}), "path": None}
        study = load_zhang2023(cfg.data)  # and so does bad data
    except ValueError as err:  # ConfigError and the data's DataError included
        raise UserError(str(err)) from None
    start = time.perf_counter()
    n_articles = min(len(study.articles), cfg.max_articles or len(study.articles))
    console.print(f"[bold]{cfg.name}[/bold]: {n_articles} articles; loading the judge ({cfg.judge if isinstance(cfg.judge, str) else 'inline config'})"
                  + (f"; scores are kept in {cfg.cache}, so an interrupted run resumes" if cfg.cache else ""))
    try:
        report = run_audit(cfg, judge=Judge(judge_cfg), study=study, out_dir=out)
    except NothingToAnalyse as err:
        raise UserError(str(err)) from None
    v, rt = report["verdict"], report["runtime"]
    console.print(f"[bold]{report['name']}[/bold]: {report['judge'].get('model', '?')} ({report['method']}), "
                  f"{report['data']['judgements']} judgements, {rt['texts_scored']} texts scored in "
                  f"{rt['seconds_scoring']:.1f} s ({time.perf_counter() - start:.1f} s in all)")
    diffs = ", ".join(f"{k} {x:+.4f}" if x is not None else f"{k} n/a" for k, x in v["differences"].items())
    console.print(f"LLM - human: {diffs}; same pattern as the paper: {v['same_pattern_as_paper']}")
    spi = v["self_preference_index"]["value"]
    console.print(f"self-preference index {'n/a' if spi is None else f'{spi:+.3f}'}; "
                  f"flagged: {v['self_preference_flagged']} "
                  f"(length-matched: {v['self_preference_flagged_length_matched']})")
    for name, path in report.get("files", {}).items():
        console.print(f"wrote {path}")
    if "wandb" in report:
        console.print(f"W&B run {report['wandb']['run_id']} ({report['wandb']['mode']}) in {report['wandb']['dir']}")
