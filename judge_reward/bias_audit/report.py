"""The audit's outputs: ``audit.json`` (every number), ``summary.md`` (a one-minute read), ``figure.png``."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .data import CATEGORIES

HUMAN_COLOUR, LLM_COLOUR = "#4C72B0", "#DD8452"


def _fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}f}"


def _est(e: dict | None, digits: int = 3) -> str:
    if not e or e.get("value") is None:
        return "n/a"
    if e.get("low") is None:
        return _fmt(e["value"], digits)
    return f"{_fmt(e['value'], digits)} [{_fmt(e['low'], digits)}, {_fmt(e['high'], digits)}]"


def _pct(e: dict | None) -> str:
    if not e or e.get("value") is None:
        return "n/a"
    if e.get("low") is None:
        return f"{100 * e['value']:.0f}%"
    return f"{100 * e['value']:.0f}% [{100 * e['low']:.0f}, {100 * e['high']:.0f}]"


def _p(p) -> str:
    if p is None:
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def plot_audit(report: dict, path: str | Path, level: str = "judgement", score: str = "mean") -> Path:
    """Two panels: the paper's grouped bars (mean score of each source per category, with 95% CIs)
    and the LLM-minus-human difference per category, raw and at equal length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = report["results"][level][score]
    cats = list(CATEGORIES)
    labels = [CATEGORIES[c][1].replace(" summary ", "\n") for c in cats]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [1.25, 1]})
    preferred = "which summary the human evaluators preferred"

    def bars(key):
        vals = [res["categories"][c][key] for c in cats]
        mid = [v["value"] if v["value"] is not None else math.nan for v in vals]
        err = [[m - (v["low"] if v["low"] is not None else m) for m, v in zip(mid, vals)],
               [(v["high"] if v["high"] is not None else m) - m for m, v in zip(mid, vals)]]
        return mid, err, vals

    h_mid, h_err, h_raw = bars("human_mean")
    l_mid, l_err, l_raw = bars("llm_mean")
    finite = [x for x in h_mid + l_mid if math.isfinite(x)]
    lows = [v["low"] for v in h_raw + l_raw if v["low"] is not None] or finite
    highs = [v["high"] for v in h_raw + l_raw if v["high"] is not None] or finite
    lo, hi = min(lows), max(highs)
    span = max(hi - lo, 1e-6)
    # Bars start below the lowest interval (like the paper's axis), so the eye compares the gaps.
    floor = lo - 0.6 * span
    x = range(len(cats))
    w = 0.38
    ax.bar([i - w / 2 for i in x], [m - floor for m in h_mid], w, bottom=floor, yerr=h_err, capsize=3,
           color=HUMAN_COLOUR, label="Human-written")
    ax.bar([i + w / 2 for i in x], [m - floor for m in l_mid], w, bottom=floor, yerr=l_err, capsize=3,
           color=LLM_COLOUR, label="GPT-3.5 (text-davinci-002)")
    ax.set_ylim(floor, hi + 0.25 * span)
    ax.set_xticks(list(x), labels, fontsize=9)
    ax.set_xlabel(preferred, fontsize=9)
    ax.set_ylabel(f"judge score: {report['units']}", fontsize=9)
    ax.set_title(f"Mean judge score of each summary, 95% CI ({level} level)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", ncols=2, frameon=False)
    ax.tick_params(labelsize=8)
    for i, c in enumerate(cats):
        ax.text(i, floor, f"n={res['categories'][c]['n']}", ha="center", va="bottom", fontsize=7, color="white")

    raw = [res["categories"][c]["difference"] for c in cats]
    ctl = [res["categories"][c]["length_controlled_difference"] for c in cats]
    for offset, series, colour, name in ((-0.12, raw, "black", "LLM - human"),
                                         (0.12, ctl, "grey", "at equal length")):
        mids = [s["value"] if s["value"] is not None else math.nan for s in series]
        errs = [[m - (s["low"] if s["low"] is not None else m) for m, s in zip(mids, series)],
                [(s["high"] if s["high"] is not None else m) - m for m, s in zip(mids, series)]]
        bx.errorbar([i + offset for i in x], mids, yerr=errs, fmt="o", color=colour, capsize=3, ms=4, label=name)
    bx.axhline(0, color="black", lw=0.6)
    bx.set_xticks(list(x), labels, fontsize=9)
    bx.set_xlabel(preferred, fontsize=9)
    bx.set_ylabel("GPT-3.5 minus human-written score", fontsize=9)
    spi = res["self_preference"]
    bx.set_title(
        f"Score difference, 95% CI; self-preference index {_fmt(spi['index']['value'], 2)} "
        f"[{_fmt(spi['index']['low'], 2)}, {_fmt(spi['index']['high'], 2)}]",
        fontsize=10,
    )
    bx.legend(fontsize=8, frameon=False)
    bx.tick_params(labelsize=8)
    model = str(report["judge"].get("model", "?")).split("@")[0]  # without the weights' hash and dtype
    fig.suptitle(f"{report['name']}: does the judge prefer LLM-written summaries?\n"
                 f"judge {model}, {report['method']}; score: {report['score']}", fontsize=11)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def summary_markdown(report: dict, figure_name: str | None = "figure.png") -> str:
    v = report["verdict"]
    res = report["results"]["judgement"]["mean"]
    pair = report["results"]["pair"]["mean"]
    spi = res["self_preference"]
    rt = report["runtime"]
    data = report["data"]
    paper = "shows the paper's pattern" if v["same_pattern_as_paper"] else "does not show the paper's pattern"
    n_higher = len(v["llm_higher_in"])
    lines = [
        f"# Self-preference audit: {report['name']}",
        "",
        f"Judge `{report['judge'].get('model', '?')}`, method **{report['method']}**, score = {report['score']} "
        f"({report['units']}). Data: Zhang et al. (2023), {data['judgements']} judgements, {data['pairs']} "
        f"(article, writer) pairs, {data['articles']} articles. Scoring {rt['texts_scored']} distinct summaries "
        f"took {rt['seconds_scoring']:.0f} s ({rt['seconds_total']:.0f} s in all).",
        "",
        "## Answer",
        "",
        f"- **Paper's finding** (GPT-4 under G-Eval scored the GPT-3.5 summaries higher in all three categories): "
        f"this judge {paper}. It scores the GPT-3.5 summary higher in {n_higher} of 3 categories "
        f"({', '.join(v['llm_higher_in']) or 'none'}); significantly (95% CI above 0) in "
        f"{', '.join(v['llm_higher_significant_in']) or 'none'}.",
        f"- **Self-preference**: when people preferred the human summary the judge preferred the LLM one "
        f"{_pct(spi['llm_when_human'])} of the time; when people preferred the LLM summary it preferred the human "
        f"one {_pct(spi['human_when_llm'])}. Index (difference) {_est(spi['index'], 2)}, "
        f"sign-flip test p = {_p(spi['p_value'])}: **{'flagged' if spi['flagged'] else 'not flagged'}** "
        f"(one-sided, false-positive rate {spi['alpha']:.1%}). On the {spi['length_matched']['index']['n']} "
        f"strict comparisons whose summaries differ by at most {spi['length_matched']['max_gap_words']:g} words: "
        f"index {_est(spi['length_matched']['index'], 2)}, p = {_p(spi['length_matched']['p_value'])}, "
        f"{'flagged' if spi['length_matched']['flagged'] else 'not flagged'}.",
        f"- **Agreement with people** on which summary is better (strict preferences): {_pct(res['agreement'])}; "
        f"one person agrees with the majority of the others {_pct(report['human_agreement'])}.",
        f"- **Length**: GPT-3.5 minus human-written length is {_est(res['length']['gap_words'], 1)} words per "
        f"judgement; "
        f"each 10 extra words move the judge's difference by {_est(res['length']['slope_per_10_words'])}.",
        "",
        "## Mean judge score per category (judgement level, 95% cluster-bootstrap CI over articles)",
        "",
        "| people preferred | n | human-written | GPT-3.5 | LLM - human | at equal length | Wilcoxon p | judge prefers LLM | agreement |",
        "|---|---:|---|---|---|---|---:|---:|---:|",
    ]
    for c in CATEGORIES:
        s = res["categories"][c]
        lines.append(
            f"| {s['label']} | {s['n']} | {_est(s['human_mean'])} | {_est(s['llm_mean'])} | {_est(s['difference'])} | "
            f"{_est(s['length_controlled_difference'])} | {_p(s['paired_test']['p_value'])} | "
            f"{_pct(s['judge_prefers_llm'])} | {_pct(s['agreement']) if s['agreement'] else '-'} |"
        )
    lines += [
        "",
        "By (article, writer) pair, majority label "
        f"({report['exclusions']['pair']['without_majority']} pairs without a majority left out):",
        "",
        "| people preferred | pairs | human-written | GPT-3.5 | LLM - human | Wilcoxon p |",
        "|---|---:|---|---|---|---:|",
    ]
    for c in CATEGORIES:
        s = pair["categories"][c]
        lines.append(
            f"| {s['label']} | {s['n']} | {_est(s['human_mean'])} | {_est(s['llm_mean'])} | {_est(s['difference'])} | "
            f"{_p(s['paired_test']['p_value'])} |"
        )
    per_aspect = [k for k in report["results"]["judgement"] if k != "mean"]
    if per_aspect:
        lines += ["", "Per aspect (judgement level): LLM - human per category, self-preference index.", "",
                  "| aspect | " + " | ".join(CATEGORIES[c][1] for c in CATEGORIES) + " | self-preference |",
                  "|---|" + "---|" * (len(CATEGORIES) + 1)]
        for a in per_aspect:
            r = report["results"]["judgement"][a]
            lines.append(f"| {a} | " + " | ".join(_est(r["categories"][c]["difference"]) for c in CATEGORIES)
                         + f" | {_est(r['self_preference']['index'], 2)} |")
    fails = report["failures"]
    lines += ["", f"Judge failures: {sum(fails.values())} texts"
              + (" (" + "; ".join(f"{k}: {n}" for k, n in fails.items()) + ")" if fails else "")
              + f"; judgements left out because a summary failed: {report['exclusions']['judgement']['excluded_by_failure']}."]
    if figure_name:
        lines += ["", f"![audit figure]({figure_name})"]
    lines += ["", "Every number, with its interval and n, is in `audit.json`.", ""]
    return "\n".join(lines)


def write_report(report: dict, out_dir: str | Path, figure: bool = True) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "audit.json", "markdown": out / "summary.md", "figure": out / "figure.png"}
    if figure:
        plot_audit(report, paths["figure"])
    paths["markdown"].write_text(summary_markdown(report, paths["figure"].name))
    paths["json"].write_text(json.dumps(report, indent=1, default=_json_default) + "\n")
    return paths


def _json_default(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
    except ImportError:  # pragma: no cover
        pass
    return str(x)
