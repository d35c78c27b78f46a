"""Published ROUGE correlations on SummEval, the targets of our reproduction.

Sources (the numbers as printed, three decimals):

* ``geval_table1``: G-Eval (Liu et al. 2023) Table 1, summary-level Spearman / Kendall; the
  same rows as UniEval (Zhong et al. 2022) Table 1.
* ``wang_table1``: Wang et al. 2023 ("Is ChatGPT a good NLG evaluator?") Table 1,
  summary-level Pearson.
* ``wang_table6``: Wang et al. 2023 Table 6, dataset-level Spearman / Pearson / Kendall.

All use ROUGE F1 averaged over SummEval's 11 references.
"""

from __future__ import annotations

from .report import MetaEvalReport

# (source, metric, aspect, level, method) -> published value
PUBLISHED_ROUGE_SUMMEVAL: dict[tuple[str, str, str, str, str], float] = {}


def _add(source: str, level: str, methods: tuple[str, ...], rows: dict[str, dict[str, tuple[float, ...]]]) -> None:
    for metric, by_aspect in rows.items():
        for aspect, values in by_aspect.items():
            for method, value in zip(methods, values):
                PUBLISHED_ROUGE_SUMMEVAL[(source, metric, aspect, level, method)] = value


_add("geval_table1", "sample", ("spearman", "kendall"), {
    "rouge1": {"coherence": (0.167, 0.126), "consistency": (0.160, 0.130), "fluency": (0.115, 0.094), "relevance": (0.326, 0.252)},
    "rouge2": {"coherence": (0.184, 0.139), "consistency": (0.187, 0.155), "fluency": (0.159, 0.128), "relevance": (0.290, 0.219)},
    "rougeL": {"coherence": (0.128, 0.099), "consistency": (0.115, 0.092), "fluency": (0.105, 0.084), "relevance": (0.311, 0.237)},
})  # fmt: skip
_add("wang_table1", "sample", ("pearson",), {
    "rouge1": {"coherence": (0.160,), "relevance": (0.359,), "consistency": (0.224,), "fluency": (0.158,)},
})  # fmt: skip
_add("wang_table6", "dataset", ("spearman", "pearson", "kendall"), {
    "rouge1": {"coherence": (0.184, 0.193, 0.129), "relevance": (0.302, 0.341, 0.217),
               "consistency": (0.137, 0.175, 0.108), "fluency": (0.080, 0.143, 0.062)},
})  # fmt: skip


def compare_to_published(report: MetaEvalReport) -> list[dict]:
    """One row per published number: ours, the paper's, and the difference (ours - paper)."""
    rows = []
    for (source, metric, aspect, level, method), paper in PUBLISHED_ROUGE_SUMMEVAL.items():
        ours = report.value(metric, aspect, level, method)
        rows.append({
            "source": source, "metric": metric, "aspect": aspect, "level": level, "method": method,
            "ours": ours, "paper": paper, "diff": ours - paper,
        })  # fmt: skip
    return rows
