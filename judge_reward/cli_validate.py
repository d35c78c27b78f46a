"""``judge-reward validate``: the reward scoreboard (validity and robustness) for judge configs.

Register in the typer app with ``app.command("validate")(validate_command)``. Exit codes: 0 when
every gate given holds, 1 when one fails (each failure named on stderr), 2 for bad input (checked
before the judge model loads). See :mod:`judge_reward.scoreboard`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .cli_errors import UserError, backend_options, check_output_folder, fail, user_errors


def _fraction(value: Optional[float], option: str, low: float = 0.0) -> None:
    if value is not None and not low <= value <= 1:
        fail(f"{option}: expected a number in [{low:g}, 1], got {value!r}")


def _positive(value: Optional[int], option: str, zero: bool = False) -> None:
    if value is not None and (value < 0 or (value == 0 and not zero)):
        fail(f"{option}: expected a whole number >= {0 if zero else 1}, got {value!r}")


def fitting_datasets(config) -> list[str]:
    """The rated data sets whose task fits a judge config's aspect file."""
    from .scoreboard import DATASETS

    name = Path(str(config.aspects_file)).stem
    return [d for d, spec in DATASETS.items() if name in spec.aspect_files]


RATED_FILE_SUFFIXES = (".jsonl", ".csv")
"""A ``--data`` entry ending so is a file of your own rated outputs (meta-eval's generic format)."""


def is_rated_file(entry: str) -> bool:
    """Whether a ``--data`` entry names a file of rated outputs rather than a built-in set."""
    return Path(entry).suffix.lower() in RATED_FILE_SUFFIXES


def load_rated_file(path: Path):
    """Your own rated outputs (``output``, ``source``, optional ``reference``, ``group``, ``system``,
    ``id`` and the human ``scores``; :class:`~judge_reward.metaeval.datasets.TableFormat`), and their
    references per input: the records' ``reference`` fields, None where no record has one."""
    from dataclasses import replace

    from .metaeval.datasets import load_dataset

    dataset = load_dataset("jsonl" if path.suffix.lower() == ".jsonl" else "csv", path)
    dataset = replace(dataset, name=path.name)  # never taken for the built-in set of the same stem
    references: dict[str, list[str]] = {}
    for rec in dataset.records:
        if rec.item.reference and rec.item.reference not in references.setdefault(rec.group, []):
            references[rec.group].append(rec.item.reference)
    return dataset, references or None


def load_rated(name: str, data_dir: Optional[Path]):
    """A rated data set by name, and its references per input (None where it has none)."""
    from .data import resolve_data_path
    from .metaeval.datasets import load_dataset, load_references
    from .scoreboard import DATASETS

    if is_rated_file(name):
        return load_rated_file(Path(name))

    spec = DATASETS[name]
    file, refs_file = spec.file, spec.references
    path = resolve_data_path(data_dir / file if data_dir else None, *file.split("/"), what=f"--data {name}")
    refs = None
    if refs_file:
        refs_path = resolve_data_path(data_dir / refs_file if data_dir else None, *refs_file.split("/"),
                                      what=f"--data {name} references")
        refs = load_references(refs_path)
        return load_dataset(spec.loader, path, refs_path), refs
    dataset = load_dataset(spec.loader, path)
    # carried by the records: data-to-text's references, Topical-Chat's human responses
    return dataset, dataset.group_references() or None


@user_errors
def validate_command(
    config: str = typer.Option("default", "--config", "-c",
                               help="judge YAML(s), comma-separated (paths or built-in names); each one's reward: section"),
    data: Optional[str] = typer.Option(None, "--data",
                                       help="rated sets, comma-separated: summeval, topical_chat, bagel, sfres (default: those the "
                                            "config's aspect file fits), or your own .jsonl/.csv of rated outputs "
                                            "(meta-eval's format: output, source, group, scores)"),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="the data folder (default: $JUDGE_REWARD_DATA, "
                                                                     "else ../shared/data)"),
    out: Path = typer.Option(Path("reports/scoreboard"), "--out", "-o",
                             help="folder for scoreboard.json, scoreboard.md and scoreboard.png"),
    groups: Optional[int] = typer.Option(None, "--groups", help="agreement and selection on the first N inputs (default: all)"),
    damage_per_group: Optional[int] = typer.Option(2, "--damage-per-group",
                                                   help="outputs per input that get damaged copies (0: every output)"),
    damage_groups: Optional[int] = typer.Option(None, "--damage-groups", help="damage the outputs of the first N inputs"),
    probe_groups: int = typer.Option(20, "--probe-groups", help="inputs probed with attacks (0: none)"),
    probe_offset: int = typer.Option(0, "--probe-offset", help="skip the first N inputs before probing (held-out inputs)"),
    max_source_words: Optional[int] = typer.Option(400, "--max-source-words", help="probed sources cut to N words"),
    cache: Optional[Path] = typer.Option(None, "--cache", help="sqlite judgment cache: a second run replays from it"),
    replay_only: bool = typer.Option(False, "--replay-only",
                                     help="answer only from --cache: a text it has no judgment for gets a None reward "
                                          "(counted under 'Not scored'), the model is never asked"),
    model: Optional[str] = typer.Option(None, "--model", help="the judge (backend.model), e.g. embedded:smollm2 or a "
                                        "model folder: a re-validation with another judge"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="the judge's dtype (backend.dtype), e.g. bfloat16"),
    device: Optional[str] = typer.Option(None, "--device", help="the judge's device (backend.device), e.g. cuda"),
    min_agreement: Optional[float] = typer.Option(None, "--min-agreement",
                                                  help="exit 1 when the reward's summary-level Spearman with an aspect is below this"),
    max_win_rate: Optional[float] = typer.Option(None, "--max-win-rate", help="exit 1 when an attack family wins more often"),
    min_damage: Optional[float] = typer.Option(None, "--min-damage",
                                               help="exit 1 when a damage family is scored below the original less often"),
    wandb: bool = typer.Option(False, "--wandb/--no-wandb", help="log the scalars and the figure to W&B"),
    n_boot: int = typer.Option(1000, "--n-boot", help="bootstrap resamples for the CIs (0: none)"),
    seed: int = typer.Option(0, "--seed", help="seed of the damage sample and the bootstrap"),
):
    """Validity and robustness of a reward, side by side: agreement, selection, damage, attacks, guard cost."""
    from .judge import JudgeConfig
    from .reward import Reward, check_reward
    from .probes import reward_task
    from .scoreboard import DATASETS, ScoreboardSettings, flat, probe_range_problem, validate, write
    from .validated import judge_model, other_judge_problem

    if replay_only and cache is None:
        fail("--replay-only: give the judgment cache to replay with --cache")
    if replay_only and not cache.is_file():
        fail(f"--cache {cache}: no such file to replay (--replay-only)")
    _fraction(min_agreement, "--min-agreement", -1.0)
    _fraction(max_win_rate, "--max-win-rate")
    _fraction(min_damage, "--min-damage")
    for value, option, zero in ((groups, "--groups", False), (damage_per_group, "--damage-per-group", True),
                                (damage_groups, "--damage-groups", False), (probe_groups, "--probe-groups", True), (probe_offset, "--probe-offset", True),
                                (max_source_words, "--max-source-words", False), (n_boot, "--n-boot", True)):
        _positive(value, option, zero)
    check_output_folder(out, "--out", "scoreboard.json, scoreboard.md and scoreboard.png")
    names = [c.strip() for c in config.split(",") if c.strip()]
    if not names:
        fail("--config: give at least one judge config")
    wanted = [d.strip() for d in data.split(",") if d.strip()] if data is not None else None
    if wanted is not None:
        unknown = [d for d in wanted if d not in DATASETS and not is_rated_file(d)]
        if unknown or not wanted:
            fail(f"--data: unknown rated set {unknown[0]!r}; known: {', '.join(DATASETS)}, or a .jsonl/.csv file of "
                 f"rated outputs" if unknown else f"--data: give at least one of {', '.join(DATASETS)}")
    # every config and data file is checked before any model loads
    plans = []
    for name in names:
        cfg = JudgeConfig.load(name)
        overrides = {k: v for k, v in (("model", model), ("dtype", dtype), ("device", device)) if v}
        cfg.backend = {**cfg.backend, **overrides}
        with backend_options(model=("--model", model), dtype=("--dtype", dtype), device=("--device", device)):
            cfg.validate()
        check_reward(cfg, {"units": "judge"} if (cfg.reward or {}).get("units") == "spread" else None)  # spread: measured below
        fits = fitting_datasets(cfg)
        sets = wanted if wanted is not None else fits
        if not sets:
            raise UserError(f"--config {name}: aspects_file {cfg.aspects_file!r} fits none of the rated sets "
                            f"({', '.join(DATASETS)}); name one with --data, or give your own .jsonl/.csv of "
                            f"rated outputs")
        if cache is not None:
            cfg.cache = {**(cfg.cache or {}), "path": str(cache), **({"replay_only": True} if replay_only else {})}
        plans.append((name, cfg, sets))
    loaded = {}
    from .data import DataNotFoundError
    from .metaeval.datasets import DatasetError

    for d in dict.fromkeys(d for _, _, sets in plans for d in sets):
        try:
            loaded[d] = load_rated(d, data_dir)
        except (DataNotFoundError, DatasetError) as err:
            fail(str(err))
        if is_rated_file(d) and len(set(loaded[d][0].groups)) == len(loaded[d][0]):
            typer.echo(f"note: {d}: no two outputs share a group (an input), so agreement within an input and "
                       f"selection are undefined (n/a); give each record the input it answers as 'group'", err=True)
    settings = ScoreboardSettings(groups=groups, damage_per_group=damage_per_group or None,
                                  damage_groups=damage_groups, probe_groups=probe_groups, probe_offset=probe_offset,
                                  max_source_words=max_source_words, n_bootstrap=n_boot, seed=seed)
    for d, (dataset, refs) in loaded.items():
        n_inputs = len(set(dataset.first_groups(groups).groups))
        if probe_range_problem(n_inputs, settings):
            fail(f"--probe-offset {probe_offset}: {d} has {n_inputs} inputs to measure (--groups), which leaves "
                 f"none to probe; lower --probe-offset or set --probe-groups 0")
    boards = []
    for name, cfg, sets in plans:
        if other_judge_problem(cfg):  # this run is the re-validation: measure, and say what to record
            typer.echo(f"note: {name} was validated with {cfg.validated_with.judge}; this scoreboard measures "
                       f"{judge_model(cfg)}. If it holds, set validated_with.judge: {judge_model(cfg)} in the config (and, "
                       f"for a reward in spread units, validated_with.spread to the spread it reports)",
                       err=True)
            cfg.validated_with = None
        reward = _reward_for(cfg, name, loaded[sets[0]][0], settings)
        for d in sets:
            dataset, refs = loaded[d]
            if is_rated_file(d) and reward_task(reward) == "dialogue":
                refs = None  # a reply's reference is the fact it may use, part of its input: no target
            boards.append(validate(reward, dataset, settings, name, refs))
    paths = write(boards, out)
    for b in boards:
        typer.echo(b.to_markdown())
    for path in paths.values():
        typer.echo(f"wrote {path}", err=True)
    if wandb:
        import wandb as wb

        run = wb.run or wb.init(project="judge-reward", job_type="validate")
        run.log({k: v for b in boards for k, v in flat(b).items()} | {"scoreboard/figure": wb.Image(str(paths["figure"]))})
        typer.echo("logged to W&B", err=True)
    failed = [line for b in boards for line in b.failures(min_agreement, max_win_rate, min_damage)]
    if failed:
        for line in failed:
            typer.echo(f"FAIL: {line}", err=True)
        raise typer.Exit(1)
    if any(x is not None for x in (min_agreement, max_win_rate, min_damage)):
        typer.echo("ok: every gate holds", err=True)


def _reward_for(cfg, name: str, dataset, settings):
    """The config's reward. In spread units with no spread recorded for this judge (a re-validation
    with another judge), the judge's spread is measured first on the rated outputs of the first
    set (the scoreboard's own first step, so cached), and the guards charge multiples of it."""
    from .judge import Judge
    from .reward import Reward, RewardConfig
    from .scoreboard import _score, judge_alone, judge_spread
    from .validated import ValidatedWith, judge_model

    if (cfg.reward or {}).get("units") != "spread" or (cfg.validated_with is not None and cfg.validated_with.spread):
        return Reward.from_config(cfg)
    judge = Judge(cfg)
    in_judge_units = Reward(judge, RewardConfig.from_dict({**cfg.reward, "units": "judge"}))
    data = dataset.first_groups(settings.groups)
    results = _score(in_judge_units, data.items, f"{data.name}: the judge's spread", True)
    spread = judge_spread(data.groups, [judge_alone(r, in_judge_units.weights) for r in results])
    if spread is None or spread <= 0:
        raise UserError(f"--config {name}: units: spread, and this judge's spread on {data.name} could not be "
                        f"measured (got {spread!r}): too few scored outputs per input")
    typer.echo(f"note: {name} charges its guards in spreads; this judge's spread on {data.name} is {spread:.4g} "
               f"(set validated_with.spread: {spread:.4g} when the scoreboard holds)", err=True)
    judge.config.validated_with = ValidatedWith(judge=judge_model(cfg), spread=spread)
    return Reward(judge)
