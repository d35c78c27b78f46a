"""One structured meta-evaluation report, shared by the CLI, the benchmarks and the training callback.

:func:`evaluate` takes metric scores, human scores and the group/system of each item and returns a
:class:`MetaEvalReport`: for every metric x aspect x level x correlation, the value, its bootstrap
interval and how much data it rests on; plus, optionally, pairwise metric comparisons.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar, Literal, Mapping, Sequence

import numpy as np

from ..bootstrap import cluster_bootstrap
from ..config import NonNegativeInt, OpenFraction, Section
from .correlation import LEVELS, METHODS
from .significance import GroupedData, PairedResult, WilliamsResult, paired_bootstrap_test, williams_test


@dataclass(frozen=True)
class MetaEvalConfig(Section):
    """What :func:`evaluate` computes.

    Attributes:
        levels: any of ``sample`` (per group, averaged), ``dataset``, ``system``.
        methods: any of ``pearson``, ``spearman``, ``kendall``.
        n_bootstrap: resamples of groups for the confidence intervals; 0 skips them.
        confidence: coverage of the percentile intervals.
        seed: seed of the resampling (results are deterministic given it).
        compare: also compare every pair of metrics per aspect (Williams test on dataset-level
            Pearson, and a paired bootstrap at ``compare_level`` / ``compare_method``).
        compare_level: level of the paired bootstrap comparison.
        compare_method: correlation of the paired bootstrap comparison.
    """

    section_path: ClassVar[str] = "MetaEvalConfig"

    levels: tuple[Literal[LEVELS], ...] = LEVELS
    methods: tuple[Literal[METHODS], ...] = METHODS
    n_bootstrap: NonNegativeInt = 1000
    confidence: OpenFraction = 0.95
    seed: int = 0
    compare: bool = True
    compare_level: Literal[LEVELS] = "sample"
    compare_method: Literal[METHODS] = "spearman"


@dataclass(frozen=True)
class Cell:
    """One correlation: ``n`` is the items (dataset), the groups used (sample) or systems (system)."""

    level: str
    method: str
    value: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    n: int = 0
    ci_resamples: int = 0
    """Bootstrap resamples the interval is the percentile of: those whose correlation was defined
    (a resample of few documents can hold one whose scores are all equal); fewer than
    ``n_bootstrap`` is marked in the printed table."""


@dataclass
class AspectResult:
    """All correlations of one metric with the human scores of one aspect."""

    metric: str
    aspect: str
    n_items: int
    dropped: int
    cells: list[Cell]

    def get(self, level: str, method: str) -> Cell:
        for c in self.cells:
            if c.level == level and c.method == method:
                return c
        raise KeyError(f"no {level}-level {method} for {self.metric}/{self.aspect}")


@dataclass(frozen=True)
class Comparison:
    """Metric A vs metric B on one aspect (A is the one listed first in the input)."""

    aspect: str
    metric_a: str
    metric_b: str
    williams: WilliamsResult
    paired_bootstrap: PairedResult | None


def _clean(x):
    """NaN -> None so the JSON is valid (json.dump would write the non-standard NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


@dataclass
class MetaEvalReport:
    """The outcome of :func:`evaluate`."""

    dataset: str
    n_items: int
    n_groups: int
    n_systems: int
    config: MetaEvalConfig
    results: list[AspectResult]
    comparisons: list[Comparison] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def metrics(self) -> list[str]:
        return list(dict.fromkeys(r.metric for r in self.results))

    @property
    def aspects(self) -> list[str]:
        return list(dict.fromkeys(r.aspect for r in self.results))

    def result(self, metric: str, aspect: str) -> AspectResult:
        for r in self.results:
            if r.metric == metric and r.aspect == aspect:
                return r
        raise KeyError(f"no result for metric {metric!r}, aspect {aspect!r}")

    def value(self, metric: str, aspect: str, level: str, method: str) -> float:
        return self.result(metric, aspect).get(level, method).value

    def flat(self, prefix: str = "metaeval") -> dict[str, float]:
        """``{prefix/<metric>/<aspect>/<level>/<method>: value}`` for loggers (W&B, Trainer)."""
        return {
            f"{prefix}/{r.metric}/{r.aspect}/{c.level}/{c.method}": c.value for r in self.results for c in r.cells
        }

    def rows(self) -> list[dict]:
        """One flat row per metric x aspect x level x method (for a W&B table or a CSV)."""
        return [
            {"metric": r.metric, "aspect": r.aspect, **asdict(c), "n_items": r.n_items, "dropped": r.dropped}
            for r in self.results
            for c in r.cells
        ]

    def to_dict(self) -> dict:
        return _clean(
            {
                "dataset": self.dataset,
                "n_items": self.n_items,
                "n_groups": self.n_groups,
                "n_systems": self.n_systems,
                "config": asdict(self.config),
                "results": [asdict(r) for r in self.results],
                "comparisons": [asdict(c) for c in self.comparisons],
                "meta": self.meta,
            }
        )

    def save_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False))

    def render(self, console=None) -> None:
        """Print one rich table per aspect: rows metric x level, columns the correlations."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        with_ci = self.config.n_bootstrap > 0
        for aspect in self.aspects:
            table = Table(title=f"{self.dataset}: {aspect} ({self.n_items} items, {self.n_groups} groups)")
            table.add_column("metric")
            table.add_column("level")
            for method in self.config.methods:
                table.add_column(method + (f" [{self.config.confidence:.0%} CI]" if with_ci else ""), justify="right")
            table.add_column("n", justify="right")
            table.add_column("dropped", justify="right")
            for r in (r for r in self.results if r.aspect == aspect):
                for level in self.config.levels:
                    cells = [r.get(level, m) for m in self.config.methods]
                    table.add_row(
                        r.metric, level, *(_fmt_cell(c, with_ci, self.config.n_bootstrap) for c in cells),
                        str(cells[0].n), str(r.dropped),
                    )
            console.print(table)
        short = [c for r in self.results for c in r.cells
                 if with_ci and not math.isnan(c.ci_low) and c.ci_resamples < self.config.n_bootstrap]
        if short:
            console.print(f"* interval from fewer than {self.config.n_bootstrap} resamples (as few as "
                          f"{min(c.ci_resamples for c in short)}): the others had an undefined correlation")
        for c in self.comparisons:
            w, pb = c.williams, c.paired_bootstrap
            line = f"{c.aspect}: {c.metric_a} vs {c.metric_b}: Williams t={w.t:.2f} p={w.p_value:.3g} (n={w.n})"
            if pb is not None:
                # a bootstrap p of 0 only means "below 1 / resamples"
                p = f"<{1 / pb.n_resamples:.1g}" if pb.p_value == 0 and pb.n_resamples else f"={pb.p_value:.3g}"
                line += f"; paired bootstrap {pb.level} {pb.method} delta={pb.delta:+.3f} p{p}"
            console.print(line)


def _fmt_cell(c: Cell, with_ci: bool, n_bootstrap: int = 0) -> str:
    if math.isnan(c.value):
        return "n/a"
    if not with_ci or math.isnan(c.ci_low):
        return f"{c.value:.3f}"
    mark = "*" if c.ci_resamples < n_bootstrap else ""
    return f"{c.value:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}]{mark}"


def _per_aspect(name: str, scores, aspects: Sequence[str], n: int) -> dict[str, Sequence]:
    """A metric's scores per aspect: one list for all aspects (ROUGE) or a mapping by aspect (a judge)."""
    if isinstance(scores, Mapping):
        # a judge may know only some of the rated aspects; it is evaluated on those
        out = {a: scores[a] for a in aspects if a in scores}
        if not out:
            raise ValueError(f"metric {name!r} has scores for none of the aspects {list(aspects)} (has: {sorted(scores)})")
    else:
        out = {a: scores for a in aspects}
    for aspect, values in out.items():
        if len(values) != n:
            raise ValueError(f"metric {name!r}, aspect {aspect!r}: {len(values)} scores for {n} items")
    return out


def evaluate(
    metrics: Mapping[str, Sequence | Mapping[str, Sequence]],
    human: Mapping[str, Sequence[float]],
    groups: Sequence,
    systems: Sequence | None = None,
    config: MetaEvalConfig = MetaEvalConfig(),
    dataset: str = "",
) -> MetaEvalReport:
    """Correlate every metric with every human aspect at the configured levels and methods.

    Args:
        metrics: metric name -> scores aligned with the items; either one sequence used for every
            aspect (a reference-based baseline) or a mapping aspect -> sequence (a judge; aspects
            it has no scores for are left out of its results).
            ``None``/NaN scores are dropped per metric and aspect and counted in ``dropped``.
        human: aspect -> human scores aligned with the items.
        groups: group of each item (document / dialogue context); bootstrap resamples these.
        systems: system of each item; required for the ``system`` level.
    """
    if not human:
        raise ValueError("evaluate: no human aspects given")
    n = len(groups)
    for aspect, values in human.items():
        if len(values) != n:
            raise ValueError(f"human scores for {aspect!r}: {len(values)} values for {n} items")
    levels = tuple(config.levels)
    if systems is None:
        levels = tuple(level for level in levels if level != "system")
    elif len(systems) != n:
        raise ValueError(f"systems: {len(systems)} values for {n} items")
    config = MetaEvalConfig(**{**asdict(config), "levels": levels})
    aspects = list(human)
    per_metric = {name: _per_aspect(name, s, aspects, n) for name, s in metrics.items()}
    order = list(dict.fromkeys(groups))
    # one seed for every metric: their intervals come from the same resampled documents

    results = []
    for name, by_aspect in per_metric.items():
        for aspect in by_aspect:
            data = GroupedData(by_aspect[aspect], human[aspect], groups, systems, order)
            cells = []
            for level in levels:
                for method in config.methods:
                    per_group = data.per_group(method) if level == "sample" else None
                    value = data.statistic(level, method, per_group=per_group)
                    used = _support(data, level, per_group)
                    low = high = math.nan
                    valid = 0
                    if config.n_bootstrap:
                        ci, _ = cluster_bootstrap(
                            lambda draws: np.array([data.statistic(level, method, d, per_group) for d in draws]),
                            len(order), value, config.n_bootstrap, config.confidence, config.seed,
                        )  # fmt: skip
                        low, high, valid = ci.low, ci.high, ci.n_resamples
                    cells.append(Cell(level, method, value, low, high, used, valid))
            results.append(AspectResult(name, aspect, len(data.metric), data.dropped, cells))

    comparisons = []
    if config.compare and len(per_metric) > 1:
        names = list(per_metric)
        for aspect in aspects:
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    if aspect not in per_metric[a] or aspect not in per_metric[b]:
                        continue
                    sa, sb = per_metric[a][aspect], per_metric[b][aspect]
                    paired = None
                    if config.n_bootstrap and (config.compare_level != "system" or systems is not None):
                        paired = paired_bootstrap_test(
                            sa, sb, human[aspect], groups, config.compare_level, config.compare_method,
                            systems, config.n_bootstrap, config.confidence, config.seed,
                        )  # fmt: skip
                    comparisons.append(Comparison(aspect, a, b, williams_test(sa, sb, human[aspect]), paired))

    return MetaEvalReport(
        dataset=dataset,
        n_items=n,
        n_groups=len(order),
        n_systems=len(set(systems)) if systems is not None else 0,
        config=config,
        results=results,
        comparisons=comparisons,
    )


def _support(data: GroupedData, level: str, per_group) -> int:
    if level == "sample":
        return int(np.sum(~np.isnan(per_group)))
    if level == "system":
        return len(set(data.sid.tolist()))
    return len(data.metric)
