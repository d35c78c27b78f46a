"""Does the judge prefer LLM-written summaries where people did not? (G-Eval paper, Section 4, Figure 2.)

The Zhang et al. (2023) judgements are split by what people preferred (the writer's summary, the
GPT-3.5 summary, or neither); both summaries of every judgement are scored with the judge; and
the judge's scores are compared per category, at two aggregation levels:

* ``judgement``: every evaluator's judgement is one row (a pair judged by six people counts six
  times, in the category each of them chose). This is the natural reading of the paper's figure.
* ``pair``: every (article, writer) pair is one row, in the category most of its evaluators
  chose; pairs whose top two labels tie are left out (and counted).

Each distinct summary is scored once: the 76 GPT-3.5 and 112 writer summaries are 188 texts,
grouped by article so the judge's backend runs each article's prompt prefix once.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar, Optional, Union

import numpy as np
from pydantic import Field

from judge_reward.config import (
    ConfigError,
    Expect,
    PositiveInt,
    Section,
    build_section,
    read_mapping,
    resolve_config_path,
)

from .data import CATEGORIES, LLM_NAME, Study, load_zhang2023, n_words
from .scoring import TextScore, score_texts
from .stats import PairedRows, StatsConfig, analyse, leave_one_out_agreement, majority

JUDGE_KEYS = {"backend", "aspects_file", "method", "gptscore", "geval", "rating", "cache"}
LEVELS = ("judgement", "pair")
MEAN = "mean"

JudgeRef = Annotated[Union[str, dict], Expect("a config name, a path or a mapping")]
AspectNames = Annotated[list[str], Expect("a list of aspect names")]
ArticleLimit = Annotated[Optional[Annotated[int, Field(ge=2)]], Expect("an integer >= 2 or null")]


@dataclass
class WandbConfig(Section):
    """Weights & Biases logging of an audit (``WANDB_MODE=offline`` writes the run locally)."""

    section_path: ClassVar[str] = "wandb"

    enabled: bool = False
    project: str = "judge-reward"
    entity: Optional[str] = None
    name: Optional[str] = None
    """Run name; defaults to the report's name."""
    tags: list[str] = field(default_factory=lambda: ["bias-audit"])


@dataclass
class AuditConfig(Section):
    """One audit: which judge, which data, how the statistics are computed, where results go.

    YAML maps one-to-one onto this class (see ``judge_reward/configs/audit/``). A judge config file given
    where an audit config is expected is taken as ``judge:`` with every other field at its default.
    """

    judge: JudgeRef = "default"
    """Judge config: a built-in name (``default``, ``geval_gemma``), a YAML path, or an inline mapping."""
    name: Optional[str] = None
    """Report title; defaults to the config file's name."""
    data: Optional[str] = None
    """The zhang2023 folder; default ``$JUDGE_REWARD_DATA/zhang2023`` or ``../shared/data/zhang2023``."""
    aspects: Optional[AspectNames] = None
    """Override the judge config's aspects. The audit's headline score is their mean."""
    cache: Optional[str] = None
    """sqlite file that keeps the judge's scores across runs (sets the judge's ``cache.path``): a
    re-run with other statistics settings then scores nothing."""
    max_articles: ArticleLimit = None
    """Audit only the first N articles (smoke runs); ``None`` for all 76."""
    chunk_articles: PositiveInt = 8
    """Articles per judge call (progress granularity; each article's summaries stay together)."""
    stats: dict = field(default_factory=dict)
    """:class:`~judge_reward.bias_audit.stats.StatsConfig` fields (a mapping, so that overrides can be merged in;
    :attr:`stats_config` is the section)."""
    wandb: dict = field(default_factory=dict)
    """:class:`WandbConfig` fields (a mapping; :attr:`wandb_config` is the section)."""

    def check(self) -> None:
        self.stats_config  # validate the nested sections now, not after the scoring
        self.wandb_config

    @property
    def stats_config(self) -> StatsConfig:
        return build_section(StatsConfig, self.stats, "stats")

    @property
    def wandb_config(self) -> WandbConfig:
        return build_section(WandbConfig, self.wandb, "wandb")

    @classmethod
    def from_yaml(cls, path: str | Path) -> "AuditConfig":
        given, path = str(path), resolve_config_path(path, "audit")
        raw = read_mapping(path)
        if "judge" not in raw and raw.keys() & JUDGE_KEYS:
            raw = {"judge": given}  # a judge config: audit it with the default settings
        raw.setdefault("name", Path(path).stem)
        return build_section(cls, raw, "", file=str(path))


class NothingToAnalyse(ValueError):
    """Every judgement of a level was removed (judge failures, no majority): the message says why."""


def judge_config(config: AuditConfig, overrides: dict | None = None):
    """The judge config an audit config names, with its aspect, backend and cache overrides applied,
    checked (every section, without loading the model)."""
    from judge_reward import JudgeConfig

    if isinstance(config.judge, dict):
        jc = build_section(JudgeConfig, config.judge, "judge")
    else:
        jc = JudgeConfig.from_yaml(config.judge)
    if config.aspects:
        jc.aspects = list(config.aspects)
    jc.backend.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if config.cache:
        jc.cache = {**jc.cache, "path": config.cache}
    jc.validate()
    return jc


def build_judge(config: AuditConfig, overrides: dict | None = None):
    """The judge an audit config names, with its aspect and backend overrides applied."""
    from judge_reward import Judge

    return Judge(judge_config(config, overrides))


SCORE_UNITS = {
    "gptscore": "GPTScore (mean token log-prob)",
    "geval": "G-Eval score (probability-weighted)",
    "rating": "rating (mean of samples)",
}


def _rows(study: Study, scores: dict[tuple[str, str], TextScore], aspect: str | None, level: str):
    """PairedRows for one score (the aspect mean when ``aspect`` is None) at one aggregation level."""
    def value(key):
        ts = scores[key]
        return ts.value if aspect is None else ts.aspects.get(aspect)

    codes = {a: k for k, a in enumerate(study.articles)}
    cols: dict[str, list] = {k: [] for k in ("cluster", "human", "llm", "human_len", "llm_len", "preference")}
    excluded = 0
    if level == "judgement":
        units = [((j.article_id, j.writer_id), j.preference) for j in study.judgements]
    else:
        votes: dict[tuple[str, str], list[str]] = {}
        for j in study.judgements:
            votes.setdefault((j.article_id, j.writer_id), []).append(j.preference)
        units = [(pair, majority(v)) for pair, v in votes.items()]
    no_majority = sum(1 for _, p in units if p is None)
    for (article, writer), pref in units:
        if pref is None:
            continue
        source = study.articles[article]
        h_text, l_text = study.writer_summaries[(article, writer)], study.llm_summaries[article]
        h, l = value((source, h_text)), value((source, l_text))
        if h is None or l is None or not (math.isfinite(h) and math.isfinite(l)):
            excluded += 1
            continue
        cols["cluster"].append(codes[article])
        cols["human"].append(h)
        cols["llm"].append(l)
        cols["human_len"].append(n_words(h_text))
        cols["llm_len"].append(n_words(l_text))
        cols["preference"].append(pref)
    # Re-code clusters densely: articles whose every row failed must not count as drawn-but-empty.
    if cols["cluster"]:
        _, cols["cluster"] = np.unique(np.asarray(cols["cluster"]), return_inverse=True)
    return PairedRows(**cols), {"excluded_by_failure": excluded, "without_majority": no_majority}


def run_audit(
    config: AuditConfig,
    judge=None,
    *,
    study: Study | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
    backend_overrides: dict | None = None,
) -> dict:
    """Score the study with the judge and compute every number of the audit.

    Writes ``audit.json``, ``summary.md`` and ``figure.png`` to ``out_dir`` when given, and logs
    to W&B when the config asks. Returns the report (the content of ``audit.json``).
    """
    t0, cpu0 = time.perf_counter(), time.process_time()
    stats_config = config.stats_config
    study = study or load_zhang2023(config.data)
    if config.max_articles:
        study = study.restrict(list(study.articles)[: config.max_articles])
    if judge is None:
        judge = build_judge(config, backend_overrides)
    t_loaded = time.perf_counter()

    texts = []
    for article_id, source in study.articles.items():
        texts.append((source, study.llm_summaries[article_id]))
        texts.extend((source, s) for (a, _), s in study.writer_summaries.items() if a == article_id)
    scores, failures = score_texts(judge, texts, chunk_sources=config.chunk_articles, progress=progress, desc="audit")
    t_scored = time.perf_counter()

    aspect_names = [a.name for a in getattr(judge, "aspects", [])]
    per_score = [MEAN] + (aspect_names if len(aspect_names) > 1 else [])
    results: dict[str, dict] = {}
    exclusions: dict[str, dict] = {}
    for level in LEVELS:
        results[level] = {}
        for score_name in per_score:
            rows, excl = _rows(study, scores, None if score_name == MEAN else score_name, level)
            if len(rows) == 0 and score_name == MEAN:
                reasons = "; ".join(f"{k}: {n}" for k, n in failures.items()) or "none"
                raise NothingToAnalyse(
                    f"{level} level: no judgement left to analyse ({excl['excluded_by_failure']} left out because a "
                    f"summary failed, {excl['without_majority']} without a majority); judge failures by reason: {reasons}")
            results[level][score_name] = analyse(rows, stats_config)
            if score_name == MEAN:
                exclusions[level] = excl
            elif len(per_score) > 1:  # an aspect can lose rows the mean keeps (its own failures)
                exclusions[level].setdefault("excluded_by_failure_per_aspect", {})[score_name] = excl["excluded_by_failure"]
    t_done = time.perf_counter()

    method = getattr(getattr(judge, "config", None), "method", "unknown")
    pairs = np.array([f"{j.article_id}/{j.writer_id}" for j in study.judgements])
    prefs = np.array([j.preference for j in study.judgements], dtype=object)
    report = {
        "name": config.name or "audit",
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "config": asdict(config),
        "judge": _describe(judge),
        "method": method,
        "aspects": aspect_names,
        "score": f"mean over aspects {aspect_names}" if len(aspect_names) > 1 else (aspect_names or ["?"])[0],
        "units": SCORE_UNITS.get(method, method),
        "llm": LLM_NAME,
        "data": {"path": study.path, **study.counts()},
        "aggregation": {
            "judgement": "every evaluator's judgement is a row, in the category that evaluator chose; a pair "
                         "judged by six people counts six times",
            "pair": "every (article, writer) pair is a row, in the category most of its evaluators chose; "
                    "pairs whose top two labels tie are left out",
            "intervals": f"percentile cluster bootstrap over articles, {stats_config.n_resamples} resamples, "
                         f"{stats_config.confidence:.0%} two-sided",
            "length": "words (whitespace split); length-controlled difference = intercept of the within-pair "
                      "regression of the score difference on the length difference (the difference at equal length)",
        },
        "runtime": {
            "seconds_total": t_done - t0,
            "cpu_seconds": time.process_time() - cpu0,
            "seconds_load": t_loaded - t0,
            "seconds_scoring": t_scored - t_loaded,
            "seconds_analysis": t_done - t_scored,
            "texts_scored": len(scores),
            "judge_stats": _safe_stats(judge),
        },
        "failures": dict(failures),
        "exclusions": exclusions,
        "human_agreement": leave_one_out_agreement(pairs, prefs),
        "results": results,
        "texts": _text_table(study, scores),
    }
    report["verdict"] = verdict(report)
    if out_dir is not None:
        from .report import write_report

        paths = write_report(report, out_dir)
        report["files"] = {k: str(v) for k, v in paths.items()}
        wb = config.wandb_config
        if wb.enabled:
            from .wandb_log import log_audit

            report["wandb"] = log_audit(report, paths, wb)
            # Rewrite the JSON so it records where the W&B run went.
            write_report(report, out_dir, figure=False)
    elif config.wandb_config.enabled:
        raise ConfigError("wandb.enabled: an audit logs its report files to W&B, so it needs an output folder")
    return report


def _describe(judge) -> dict:
    if callable(getattr(judge, "describe", None)):
        try:
            return judge.describe()
        except Exception as err:  # a description must never sink a finished audit
            return {"error": str(err)}
    return {"model": type(judge).__name__}


def _safe_stats(judge) -> dict:
    try:
        return judge.stats() if callable(getattr(judge, "stats", None)) else {}
    except Exception as err:
        return {"error": str(err)}


def _text_table(study: Study, scores: dict[tuple[str, str], TextScore]) -> list[dict]:
    rows = []
    for article_id, source in study.articles.items():
        entries = [("llm", None, study.llm_summaries[article_id])]
        entries += [("human", w, s) for (a, w), s in study.writer_summaries.items() if a == article_id]
        for kind, writer, text in entries:
            ts = scores.get((source, text))
            rows.append({
                "article_id": article_id, "writer_id": writer, "kind": kind, "words": n_words(text),
                "score": ts.value if ts else None, "aspects": ts.aspects if ts else {},
                "failure": ts.reason if ts else "not scored",
            })
    return rows


def verdict(report: dict) -> dict:
    """The audit's answers in one place: the paper's pattern, self-preference, length."""
    main = report["results"]["judgement"][MEAN]
    pair = report["results"]["pair"][MEAN]
    cats = main["categories"]
    spi = main["self_preference"]
    return {
        "same_pattern_as_paper": main["pattern"]["same_as_paper"],
        "llm_higher_in": main["pattern"]["llm_higher_in"],
        "llm_higher_significant_in": main["pattern"]["llm_higher_significant_in"],
        "same_pattern_by_pair": pair["pattern"]["same_as_paper"],
        "differences": {c: cats[c]["difference"]["value"] for c in CATEGORIES},
        "self_preference_flagged": spi["flagged"],
        "self_preference_index": spi["index"],
        "self_preference_flagged_length_matched": spi["length_matched"]["flagged"],
        "self_preference_index_length_matched": spi["length_matched"]["index"],
        "agreement": main["agreement"],
        "human_agreement": report["human_agreement"]["value"],
        "length_gap_words": main["length"]["gap_words"]["value"],
        "length_slope_per_10_words": main["length"]["slope_per_10_words"]["value"],
    }


__all__ = ["AuditConfig", "WandbConfig", "build_judge", "run_audit", "verdict"]
