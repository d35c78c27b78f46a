"""``judge-reward meta-eval``: correlate a judge (and/or ROUGE baselines) with human judgments.

Register in the typer app with ``app.command("meta-eval")(meta_eval)``. The work is done by
:func:`run_meta_eval`, which returns a :class:`~judge_reward.metaeval.report.MetaEvalReport`
and is what tests and notebooks call; :func:`meta_eval` adds printing, JSON and W&B.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

import typer
from rich.console import Console

from .cli_errors import UserError, check_output_file, user_errors
from .data import resolve_data_path
from .metaeval.datasets import LOADERS, MetaEvalDataset, TableFormat, load_dataset

# The statistics (scipy) and ROUGE load when meta-eval runs, not when the CLI starts.
if TYPE_CHECKING:
    from .metaeval.report import MetaEvalConfig, MetaEvalReport

BASELINES = ("rouge",)


def _split(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def run_meta_eval(
    dataset: MetaEvalDataset,
    judge=None,
    judge_name: str = "judge",
    baselines: Sequence[str] = (),
    aspects: Sequence[str] | None = None,
    config: MetaEvalConfig | None = None,
    console: Console | None = None,
    reward=None,
) -> MetaEvalReport:
    """Score ``dataset`` with the judge and/or baselines and correlate with its human scores.

    Aspects default to the dataset's; the judge scores those it knows (the rest are reported
    for the baselines only). With ``reward`` (a :class:`~judge_reward.reward.Reward` on the same
    judge) the metric ``reward``, one number per item (what a trainer gets), is correlated with
    every aspect's ratings. Timing and judge and reward failures go into ``report.meta``.
    ``config``: bootstrap and seed (default :class:`MetaEvalConfig`'s).
    """
    from .metaeval.judging import judge_aspects, judge_scores
    from .metaeval.report import MetaEvalConfig, evaluate
    from .metaeval.rouge import RougeConfig, rouge_scores

    config = config if config is not None else MetaEvalConfig()
    console = console or Console(stderr=True)
    for b in baselines:
        if b not in BASELINES:
            raise ValueError(f"baselines: unknown baseline {b!r}; known: {', '.join(BASELINES)}")
    if reward is not None and judge is None:
        raise ValueError("a reward needs its judge")
    if judge is None and not baselines:
        raise ValueError("nothing to evaluate: give a judge config (--config) and/or --baselines rouge")
    aspects = list(aspects or dataset.aspects)
    for a in aspects:
        dataset.human(a)  # unknown aspect -> KeyError naming the rated ones
    metrics: dict = {}
    meta: dict = {"dataset_path": dataset.path, "seconds": {}}

    if judge is not None:
        scored, skipped = judge_aspects(judge, aspects)
        if skipped:
            console.print(f"[yellow]the judge has no aspect {', '.join(skipped)}; skipped for the judge[/yellow]")
        if scored:
            start = time.perf_counter()
            from tqdm.auto import tqdm

            what = ", ".join(scored) + (" and the reward" if reward is not None else "")
            with tqdm(total=len(dataset), desc=f"judge ({what})", unit="item") as bar:
                judged = judge_scores(judge, dataset.items, scored, on_chunk=lambda n: bar.update(n - bar.n),
                                      reward=reward)  # fmt: skip
            meta["seconds"][judge_name] = time.perf_counter() - start
            meta["judge_failures"] = dict(judged.failures)
            metrics[judge_name] = judged.scores  # only the aspects it scored
            if callable(getattr(judge, "describe", None)):
                meta["judge"] = judge.describe()
        if reward is not None:
            if not scored:  # the judge knows none of the rated aspects: score the reward alone
                judged = judge_scores(judge, dataset.items, [], reward=reward)
            # one number per item, held against every rated aspect
            metrics["reward"] = {a: judged.rewards for a in aspects}
            meta["reward_failures"] = dict(judged.reward_failures)
            meta["reward"] = reward.describe()

    if "rouge" in baselines:
        start = time.perf_counter()
        rouge = rouge_scores([it.output for it in dataset.items], dataset.references, RougeConfig())
        meta["seconds"]["rouge"] = time.perf_counter() - start
        metrics.update(rouge)

    start = time.perf_counter()
    report = evaluate(
        metrics,
        {a: dataset.human(a) for a in aspects},
        dataset.groups,
        dataset.systems,
        config,
        dataset=dataset.name,
    )
    meta["seconds"]["correlations"] = time.perf_counter() - start
    report.meta.update(meta)
    return report


def log_to_wandb(report: MetaEvalReport, project: str = "judge-reward", name: str | None = None) -> str:
    """Log the report to a W&B run: every value in the run summary, and all rows as a wandb.Table.

    Returns the run directory. Honours ``WANDB_MODE`` (``offline`` writes files only).
    """
    import wandb

    run = wandb.init(
        project=project, name=name, job_type="meta-eval",
        config={"dataset": report.dataset, "metaeval": report.to_dict()["config"], **report.meta},
    )  # fmt: skip
    try:
        rows = report.rows()
        columns = list(rows[0]) if rows else []
        table = wandb.Table(columns=columns, data=[[r[c] for c in columns] for r in rows])
        run.log({"metaeval/table": table})
        run.summary.update(report.flat())
        return run.dir
    finally:
        run.finish()


@user_errors
def meta_eval(
    dataset: str = typer.Option(..., "--dataset", help=f"data format: {' | '.join(LOADERS)}"),
    data: Path = typer.Option(
        ..., "--data", help="the data file (e.g. ../shared/data/summeval/summeval.json, or summeval/summeval.json "
        "under $JUDGE_REWARD_DATA)"
    ),
    references: Optional[Path] = typer.Option(
        None, "--references", help="SummEval multi-reference file (references.json), for ROUGE"
    ),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="judge YAML (path or built-in name)"),
    baselines: Optional[str] = typer.Option(None, "--baselines", help="comma-separated baselines: rouge"),
    aspects: Optional[str] = typer.Option(None, "--aspects", help="comma-separated aspects (default: all rated)"),
    limit: Optional[int] = typer.Option(None, "--limit", help="use the first N documents / contexts only"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the full report as JSON here"),
    n_bootstrap: int = typer.Option(1000, "--bootstrap", help="bootstrap resamples of documents for the CIs (0: none)"),
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap"),
    with_reward: bool = typer.Option(
        True, "--reward/--no-reward", help="also correlate the config's reward (the number `judge-reward score` "
        "writes and a trainer built from the config gets) with every aspect's ratings"
    ),
    use_wandb: bool = typer.Option(False, "--wandb", help="log the summary and a table to Weights & Biases"),
    wandb_project: str = typer.Option("judge-reward", "--wandb-project"),
    human_fields: Optional[str] = typer.Option(
        None, "--human-fields", help="jsonl/csv: comma-separated human score fields (default: 'scores' / human_*)"
    ),
    output_field: str = typer.Option("output", "--output-field", help="jsonl/csv: field with the judged text"),
    source_field: str = typer.Option("source", "--source-field", help="jsonl/csv: field with the input"),
    group_field: str = typer.Option("group", "--group-field", help="jsonl/csv: field with the document/context id"),
    system_field: str = typer.Option("system", "--system-field", help="jsonl/csv: field with the system id"),
):
    """Correlate a judge and/or ROUGE with human judgments (sample, dataset and system level, with CIs)."""
    console = Console(stderr=True)
    fmt = TableFormat(
        output=output_field, source=source_field, group=group_field, system=system_field,
        human=tuple(_split(human_fields)),
    )  # fmt: skip
    if limit is not None and limit < 1:
        raise UserError(f"--limit: expected a whole number >= 1, got {limit}")
    if n_bootstrap < 0:
        raise UserError(f"--bootstrap: expected a whole number >= 0, got {n_bootstrap}")
    if out is not None:
        check_output_file(out, "--out")
    try:
        data = resolve_data_path(data, what="--data")
        if references is not None:
            references = resolve_data_path(references, what="--references")
        ds = load_dataset(dataset, data, references, fmt).first_groups(limit)
        judge, judge_name = None, "judge"
        if config:
            from .judge import Judge, JudgeConfig

            judge_config = JudgeConfig.from_yaml(config)
            if with_reward:
                from .reward import check_reward
                check_reward(judge_config)  # before the model loads
            if not with_reward and judge_config.gptscore.get("unconditional"):
                # only the reward's guards read the source-free pass; the judge's scores do not
                judge_config.gptscore = {**judge_config.gptscore, "unconditional": False}
            judge = Judge.from_config(judge_config)
            judge_name = f"judge:{judge.config.method}"
        reward = None
        if judge is not None and with_reward:
            from .reward import Reward

            reward = Reward(judge)
        from .metaeval.report import MetaEvalConfig

        report = run_meta_eval(
            ds, judge, judge_name, _split(baselines), _split(aspects) or None,
            MetaEvalConfig(n_bootstrap=n_bootstrap, seed=seed), console, reward=reward,
        )  # fmt: skip
    except (ValueError, KeyError) as err:
        # loader/config errors already name the field and record; show them without a traceback
        # (a KeyError's str() would add quotes around the message)
        raise UserError(str(err.args[0]) if err.args else repr(err)) from None
    report.render(Console())
    if out is not None:
        report.save_json(out)
        console.print(f"wrote {out}")
    if use_wandb:
        run_dir = log_to_wandb(report, wandb_project)
        console.print(f"logged to W&B ({run_dir})")
    if report.meta.get("judge_failures"):
        console.print(f"[yellow]judge failures (dropped): {json.dumps(report.meta['judge_failures'])}[/yellow]")
    if report.meta.get("reward_failures"):
        console.print(f"[yellow]rewards None (dropped): {json.dumps(report.meta['reward_failures'])}[/yellow]")
