"""The engine's commands of the ``judge-reward`` command line: ``score`` and ``steps`` (defined here),
``meta-eval`` and ``serve`` (from their modules), assembled by :func:`new_app`.

The console command itself is :mod:`judge_reward.console`, which adds the commands of the packages
built on the engine (``train``, ``label-pairs``, ``audit``); the engine imports none of them.
``python -m judge_reward.cli`` runs the engine's commands alone. A user's mistake ends a command with
one line and exit status 2 (:mod:`judge_reward.cli_errors`); everything ``score`` is given is checked
before the model loads.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .aspects import load_aspects
from .cli_errors import (
    OneLineUsageErrors, UserError, backend_options, check_output_file, debug_option, read_json_lines, user_errors,
)
from .config import ConfigError

console = Console(stderr=True)


def _read_jsonl(path: Path) -> list[dict]:
    """The input rows, checked: every mistake names the file, the line, the field and the value."""
    rows = []
    for n, row in read_json_lines(path):
        if not isinstance(row, dict):
            raise UserError(f"{path}:{n}: expected a JSON object with field 'output', got {type(row).__name__}")
        if not isinstance(row.get("output"), str):
            got = f", got {row['output']!r:.60}" if "output" in row else ""
            raise UserError(f"{path}:{n}: field 'output' (text) is required{got}")
        for key, types in (("source", str), ("reference", str), ("id", (str, int))):
            value = row.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
                raise UserError(f"{path}:{n}: field {key!r} must be text, got {value!r:.60}")
        rows.append(row)
    if not rows:
        raise UserError(f"no items in {path} (expected one JSON object per line)")
    return rows


def _names(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def check_score_inputs(input: Path, output: Path, config: str, aspects: str | None, method: str | None,
                       backend: dict) -> tuple:
    """``(JudgeConfig, methods, aspects, rows)`` for ``score``, everything checked before the model
    loads: the config file, the aspects, the methods and their sections, the backend overrides, the
    input rows and the output folder. ``--aspects`` and ``--method`` choose the scores written; the
    judge (its G-Eval panel) and the reward stay the config's, so a score does not depend on which
    others were asked for and ``reward`` is what a trainer built from the config gets."""
    from .judge import JudgeConfig

    cfg = JudgeConfig.from_yaml(config)
    cfg.backend.update({k: v for k, v in backend.items() if v is not None})
    methods = _names(method or cfg.method)
    if not methods:
        raise UserError(f"--method: no method named in {method!r}; choose gptscore, geval or rating")
    if cfg.reward is not None and "method" not in cfg.reward:
        # the reward stays the config's (what a trainer built from it gets), whatever --method shows
        cfg.reward = {**cfg.reward, "method": cfg.method}
    cfg.method = methods[0]
    with backend_options(model=("--model", backend.get("model")), device=("--device", backend.get("device")),
                         max_batch_rows=("--batch-size", backend.get("max_batch_rows"))):
        known = [a.name for a in cfg.validate(methods)]
    from .reward import check_reward
    check_reward(cfg)  # score writes the config's reward on every line
    selected = _names(aspects) if aspects else None
    if selected:
        aspect_set = load_aspects(cfg.aspects_file)
        try:
            for name in selected:
                aspect_set.get(name)
        except ConfigError as err:
            raise UserError(f"--aspects: {err.problem}") from None
        outside = [a for a in selected if a not in known]
        if outside:
            raise UserError(f"--aspects: {', '.join(map(repr, outside))} not among the aspects of {cfg.source_file} "
                            f"({', '.join(known)}); add them to its aspects: to judge them")
    rows = _read_jsonl(input)
    check_output_file(output, "--output")
    return cfg, methods, selected, rows


@user_errors
def score(
    input: Path = typer.Argument(..., help="JSONL with fields output, source, optional reference and id ('-' for stdin)"),
    output: Path = typer.Option(Path("-"), "--output", "-o", help="JSONL to write ('-' for stdout)"),
    config: str = typer.Option("default", "--config", "-c", help="judge YAML (path or built-in name in judge_reward/configs/judges)"),
    aspects: Optional[str] = typer.Option(
        None, help="comma-separated aspects whose scores to write (default: the config's); the reward stays the config's"),
    method: Optional[str] = typer.Option(
        None, help="comma-separated methods whose scores to write: gptscore, geval, rating; the reward stays the config's"),
    model: Optional[str] = typer.Option(None, help="override backend.model"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="override backend.max_batch_rows"),
    device: Optional[str] = typer.Option(None, help="override backend.device (cpu, cuda, auto)"),
    chunk: int = typer.Option(64, help="items per judge call (progress granularity)"),
):
    """Score texts on aspects; write one JSON line per input with scores and their details."""
    from .judge import Judge
    from .methods.base import Item
    from .reward import Reward

    if chunk < 1:
        raise UserError(f"--chunk: expected a positive number of items, got {chunk}")
    overrides = {"model": model, "device": device, "max_batch_rows": batch_size}
    cfg, methods, selected, rows = check_score_inputs(input, output, config, aspects, method, overrides)
    judge = Judge(cfg)  # loads the model
    # The config's reward (judge_reward.reward): exactly what a TRL reward function built from this
    # config returns for each line, guards included.
    reward = Reward(judge)
    items = [Item(r["output"], r.get("source") or "", r.get("reference"), str(r["id"]) if "id" in r else None) for r in rows]
    reward.use_inputs([it.source for it in items if it.source])
    out = sys.stdout if str(output) == "-" else output.open("w")
    start, failures, totals, rewarded_any = time.perf_counter(), Counter(), {}, False
    from tqdm.auto import tqdm

    with tqdm(total=len(items), desc="score", unit="item", file=sys.stderr) as bar:
        for lo in range(0, len(items), chunk):
            part = items[lo:lo + chunk]
            rewarded = reward(part)
            per_method = {m: judge.score(part, aspects=selected, method=m) for m in methods}
            _add_totals(totals, per_method)
            for k, item in enumerate(part):
                r = rewarded[k]
                rewarded_any = rewarded_any or r.value is not None
                record = {"id": item.id if item.id is not None else lo + k, "reward": r.value}
                if r.value is None:
                    record["reward_reason"] = r.reason
                    failures[f"reward: {r.reason}"] += 1
                record.update({"reward_components": r.components, "reward_term": r.term, "guards": r.guards,
                               "scores": {}, "details": {}, "failures": {}})
                for m in methods:
                    for aspect, s in per_method[m][k].items():
                        key = f"{m}/{aspect}"
                        record["scores"][key] = s.value
                        record["details"][key] = s.details if s.tokens is None else {**s.details, "tokens": s.tokens.to_json()}
                        if s.value is None:
                            record["failures"][key] = s.reason
                            failures[s.reason] += 1
                out.write(json.dumps(record, default=float) + "\n")
            bar.update(len(part))
    if out is not sys.stdout:
        out.close()
    n_aspects = len(selected or judge.aspects)
    console.print(_score_table(judge, len(items), n_aspects, methods, time.perf_counter() - start, totals, failures))
    scored_any = any(n for _, n, _ in totals.values())
    if not (rewarded_any or scored_any):  # every line written, but a script must see that nothing was judged
        typer.echo(f"judge-reward score: the judge failed on every item "
                   f"({failures.most_common(1)[0][0] if failures else 'no reason recorded'}); "
                   "the lines carry each reason", err=True)
        raise typer.Exit(1)


def _add_totals(totals: dict, per_method: dict) -> None:
    """Add one chunk's scores to ``totals``: ``method/aspect`` -> [sum of values, count, failures]."""
    for m, rows in per_method.items():
        for row in rows:
            for aspect, s in row.items():
                entry = totals.setdefault(f"{m}/{aspect}", [0.0, 0, 0])
                if s.value is None:
                    entry[2] += 1
                else:
                    entry[0] += s.value
                    entry[1] += 1


def _score_table(judge, n_items: int, n_aspects: int, methods: list[str], seconds: float, totals: dict,
                 failures: Counter) -> Table:
    """The closing table of ``score``: run figures, the mean score per method and aspect, and every
    failure reason in full."""
    table = Table(title=f"judge-reward score: {n_items} items x {n_aspects} aspects x {len(methods)} methods")
    table.add_column("what", overflow="fold")
    table.add_column("value", justify="right")
    table.add_row("model", judge.backend.model_id)
    table.add_row("seconds", f"{seconds:.1f}")
    table.add_row("items/s", f"{n_items / max(seconds, 1e-9):.2f}")
    for key, (total, n, failed) in totals.items():
        mean = f"{total / n:.4f}" if n else "n/a"
        table.add_row(f"mean {key}", mean + (f" ({failed} failed)" if failed else ""))
    table.add_row("failures", str(sum(failures.values())))
    for reason, n in failures.most_common(10):
        table.add_row(f"  {reason}", str(n))
    backend_stats = judge.stats().get("backend")
    if backend_stats:
        for key, value in backend_stats.items():
            table.add_row(f"backend {key}", str(value))
    return table


@user_errors
def steps(
    out: Path = typer.Option(..., "--out", help="YAML file to write the generated steps to"),
    config: str = typer.Option("default", "--config", "-c", help="judge YAML whose backend generates the steps"),
    aspects: Optional[str] = typer.Option(None, help="comma-separated aspects (default: the config's)"),
    overwrite: bool = typer.Option(False, help="regenerate steps that are already stored"),
):
    """Auto-CoT: generate G-Eval evaluation steps once per aspect and store them (with a content hash)."""
    from .autocot import generate_steps
    from .judge import Judge, JudgeConfig

    cfg = JudgeConfig.from_yaml(config)
    if aspects:
        cfg.aspects = _names(aspects)
    cfg.validate()
    check_output_file(out, "--out")
    judge = Judge(cfg)
    store = generate_steps(judge.backend, judge.aspects, out, overwrite=overwrite)
    for name, entry in store.entries.items():
        console.print(f"[bold]{name}[/bold]")
        for n, step in enumerate(entry["steps"], 1):
            console.print(f"  {n}. {step}")
    console.print(f"wrote {out}")


def new_app() -> typer.Typer:
    """A Typer app with ``--debug`` and the engine's commands: score, steps, meta-eval, serve, probe."""
    from .cli_metaeval import meta_eval
    from .cli_probe import probe_command
    from .cli_validate import validate_command
    from .service.server import serve_command

    new = typer.Typer(cls=OneLineUsageErrors, add_completion=False, no_args_is_help=True,
                      help="LLM-as-judge metrics as RLHF rewards.")
    new.callback()(debug_option)
    new.command("score")(score)
    new.command("steps")(steps)
    new.command("meta-eval")(meta_eval)
    new.command("serve")(serve_command)
    new.command("probe")(probe_command)
    new.command("validate")(validate_command)
    return new


app = new_app()

if __name__ == "__main__":
    app()
